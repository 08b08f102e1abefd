// Package migrate copies shard checkpoints between a foreign lease table and
// a kinesislease lease table: Import moves a consumer from the Java Kinesis
// Client Library (KCL 1.x, 2.x, 3.x) or from vmware-go-kcl-v2 to
// kinesislease, and Export writes kinesislease's checkpoints back into a KCL
// table, so that a team can roll back. The command `kinesislease import` and
// `kinesislease export` run them.
//
// # The foreign tables
//
// KCL (amazon-kinesis-client, DynamoDBLeaseSerializer and
// DynamoDBMultiStreamLeaseSerializer; KinesisClientLeaseSerializer in 1.x):
// one item per shard keyed leaseKey, which is the bare shard id, or
// "account:stream:creationEpoch:shardId" for a multi-stream application;
// checkpoint (a sequence number or one of the sentinels TRIM_HORIZON,
// LATEST, AT_TIMESTAMP, SHARD_END), checkpointSubSequenceNumber, parentShardId
// (a string set), leaseOwner and leaseCounter. KCL 3.x items whose entityType
// is not LEASE are ignored, and so is a pendingCheckpoint (prepared, never
// committed).
//
// vmware-go-kcl-v2 (clientlibrary/checkpoint/dynamodb-checkpointer.go): one
// item per shard keyed ShardID, with Checkpoint (a sequence number or
// SHARD_END; absent until the first checkpoint), AssignedTo, LeaseTimeout,
// ParentShardId and ClaimRequest.
//
// # What a checkpoint means
//
// Both libraries checkpoint the last record processed, and resume after it:
// the KCL reads again from the checkpoint's record (AT_SEQUENCE_NUMBER) and
// drops every user record up to and including (checkpoint,
// checkpointSubSequenceNumber); vmware-go-kcl reads AFTER_SEQUENCE_NUMBER.
// kinesislease's Checkpoint{Sequence, SubSequence} counts the user records of
// Sequence done (0: all of them). Import therefore translates:
//
//	KCL seq, sub n >= 0      seq/n+1 inside a KPL aggregate with more than n+1
//	                         user records, else seq (the record done); the
//	                         import reads the record from Kinesis to know
//	KCL seq, sub < 0         AT_SEQUENCE_NUMBER:seq (nothing of seq done;
//	                         what Export writes for that position)
//	vmware-go-kcl seq        seq
//	SHARD_END                SHARD_END: children still wait for their parents
//	TRIM_HORIZON, LATEST     the same position (leases.RewindTrimHorizon,
//	                         leases.RewindLatest): no record was processed, and
//	                         the shard is read from where the source would
//	                         have started it, whatever the subscription's start
//	                         position; the first record processed replaces it
//	AT_TIMESTAMP             AT_TIMESTAMP:<t>, t given by WithAtTimestamp: the
//	                         KCL keeps the time in the application's
//	                         configuration, not in the table, so without it
//	                         the import refuses (ErrNeedTimestamp)
//	no checkpoint            nothing: the row is created free without one
//
// A closed shard that the stream still lists, that has no KCL item but whose
// child has one, was finished (the KCL deletes the leases of finished parents,
// and does not wait for a parent without a lease): it gets SHARD_END.
// Every shard the stream lists gets a row, so that the service takes them all
// at once. Items of shards the stream no longer lists are skipped.
//
// Export writes the inverse, so that Export then Import gives back exactly
// the checkpoints exported: seq/n as (seq, n-1); seq as (seq, n-1) for a KPL
// aggregate of n user records and (seq, 0) for a plain record;
// AT_SEQUENCE_NUMBER:seq as (seq, -1); TRIM_HORIZON, LATEST and SHARD_END as
// themselves; AT_TIMESTAMP:<t> as AT_TIMESTAMP (the KCL application's
// configured timestamp applies: the row's note says which time ours had). A
// shard without a checkpoint is not exported. Exported items carry what the
// KCL writes: leaseKey, leaseCounter (bumped, conditional on the one read),
// checkpoint, checkpointSubSequenceNumber, ownerSwitchesSinceCheckpoint,
// parentShardId, childShardIds, startingHashKey, endingHashKey, entityType,
// and, with a multi-stream identifier, streamName and shardId; a pending
// two-phase checkpoint is removed as the KCL's own checkpoint does.
//
// # Safety
//
// Before writing anything, Import and Export read the tables twice, an
// interval apart (WithInterval, default 10s: the KCL renews each lease every
// failover time / 3, 3.3s by default, and vmware-go-kcl every 2.5s), and
// refuse:
//   - while the source application is running: an item of the source
//     table changed between the two reads (Export: the KCL table, or a
//     kinesislease row or membership heartbeat), a *RunningError;
//   - to move a checkpoint backwards (*BackwardsError);
//   - to write a row a live member holds, one whose holder heartbeated
//     between the two reads (*HeldError); a row held by a member that did
//     not heartbeat gets a rewind request, applied by its next holder.
//
// WithForce overrides all three: a held row then gets a rewind request
// that its holder applies within a heartbeat, as `kinesislease rewind` does.
// WithDryRun reads and plans, and writes nothing. Every refusal is reported
// at once, and nothing is written while any stands.
//
// Our rows are those of Ours.Stream's name ("stream:shard"), or, with
// Ours.LeaseNamespace, those of a subscription given
// kinesislease.WithLeaseNamespace ("namespace/stream:shard"); Kinesis is
// called with Ours.Stream either way. They are written through the
// leases.Store (Create, Rewind), with the conditional writes and counters
// the service uses; the foreign table is read with Scan, and, by Export,
// written with conditional UpdateItem calls. Import needs dynamodb:Scan on
// the source table, dynamodb:GetItem and dynamodb:UpdateItem on ours, and
// kinesis:ListShards, GetShardIterator and GetRecords; Export the same, with
// dynamodb:GetItem and UpdateItem on the KCL table too.
package migrate
