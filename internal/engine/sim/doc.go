// Package sim checks the lease protocol of package engine (the membership
// protocol, engine.Group) by simulation.
//
// Its non-test part is three tools a test can build a simulation from:
//
//   - Stream, an in-memory Kinesis stream implementing kinesisx.Reader
//     (ListShards with paging, GetShardIterator of every type,
//     GetRecords with Limit, NextShardIterator, closed shards, iterators
//     that expire after five minutes and the five-calls-a-second limit per
//     shard), whose Client views add a process's delays, errors, stalls and
//     death. It runs on time.Now and timers, so inside a testing/synctest
//     bubble it runs on virtual time, where no network emulator can be
//     used.
//   - FaultStore, one process's view of a shared leases.Store (and
//     leases.Membership): delays, failures before the write, answers lost
//     after the write landed, stalls (a paused process) and death, decided
//     per call by hooks, with a hook that sees every call reach the store.
//   - Table, an in-memory lease table whose rows can be deleted, whose whole
//     content can be dropped at once (the table recreated) and which can be
//     missing for a while.
//
// The tests (go test ./internal/engine/sim/):
//
//   - TestMembership: hundreds of seeded simulations of several Groups
//     under faults in synctest bubbles, checking the protocol's invariants
//     at every handler call and every write (see checker in check_test.go
//     and the model of the fence in membership_test.go), then liveness and
//     fair shares once faults stop. A failing seed prints the command that
//     replays it. KINESISLEASE_SIM_SEEDS=30000 (with -timeout 0) is the long
//     mode; it prints the worst failover and fair-share times.
//     KINESISLEASE_SIM_EXCLUDE leaves kinds of events out of every plan.
//   - TestMembershipFaults: one fault of the table or of the calls around
//     it (a held row deleted, the table recreated, the table missing, one
//     membership row throttled, slow store calls, slow ListShards) on a
//     running fleet, in virtual time, with checks of its own.
//   - TestMembershipBugs: bugs found in the engine, each a scenario that
//     fails while its bug is there.
//   - TestDynamoMembership: the same checks in real time against the
//     DynamoDB store on DynamoDB Local, a few seeds by default
//     (KINESISLEASE_DYNAMO_SEEDS for more).
package sim
