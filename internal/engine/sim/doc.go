// Package sim checks the lease protocol of package shard by simulation.
//
// Its non-test part is two tools a test can build a simulation from:
//
//   - Stream, an in-memory Kinesis stream implementing kinesisx.Reader
//     (ListShards with paging, GetShardIterator of every type,
//     GetRecords with Limit, NextShardIterator, closed shards, iterators
//     that expire after five minutes and the five-calls-a-second limit per
//     shard), whose Client views add a process's delays, errors, stalls and
//     death. It runs on time.Now and timers, so inside a testing/synctest
//     bubble it runs on virtual time, where no network emulator can be
//     used.
//   - FaultStore, one process's view of a shared leases.Store: delays,
//     failures before the write, answers lost after the write landed,
//     stalls (a paused process) and death, decided per call by hooks, with
//     a hook that sees every call reach the store.
//
// The tests (go test ./internal/engine/sim/) run TestMembership, hundreds
// of seeded simulations of several engine.Groups (the membership protocol)
// under faults in synctest bubbles, checking the protocol's invariants at
// every handler call and every write (see checker in check_test.go). A
// failing seed prints the command that replays it; KINESISLEASE_SIM_SEEDS=5000
// runs more seeds.
package sim
