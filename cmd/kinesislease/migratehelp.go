package main

// The help texts of import and export, which copy a stream's checkpoints
// from a KCL or vmware-go-kcl lease table and write them into a KCL one,
// and the options they share.

const migrateOptionsHelp = `
       --kcl-stream (string)
          The stream's KCL multi-stream identifier,
          account:stream:creationEpoch. import: which items of a
          multi-stream table to read (by default those of --stream's name,
          and its account for an ARN; needed when several creation epochs
          match). export: write multi-stream items, keyed
          account:stream:creationEpoch:shardId; without it the keys are
          bare shard ids.

       --interval (duration)
          The time between the two reads that tell whether an application
          still writes a table. Default: 10s (the KCL renews each lease every
          3.3s by default, vmware-go-kcl every 2.5s).

       --dry-run (boolean)
          Read, check and print every row it would write; write nothing.

       --force (boolean)
          Write despite the safety checks: a table still being written, a
          checkpoint moving backwards, a row held by a live instance (which
          gets a rewind request it applies within a heartbeat).
`

const importHelp = `IMPORT()                                                              IMPORT()

NAME
       import - copy checkpoints from a KCL or vmware-go-kcl lease table

DESCRIPTION
       Moves the consumer of a stream from the Java Kinesis Client Library
       (1.x, 2.x, 3.x) or vmware-go-kcl-v2 to kinesislease: stop the old
       application, run import, start the service. Every shard the stream
       lists gets a row in --table, written through the lease store's
       conditional writes; the service resumes each shard right after the
       record the old application checkpointed, with no record lost.

       A foreign checkpoint means "processed up to and including":

       sequence number (with KCL's checkpointSubSequenceNumber)
          Resumed after it: inside a KPL aggregate, at the next user record
          (the record is read from Kinesis to count its user records).

       SHARD_END
          Kept: the shard is done, and its children start at once. A closed
          shard without a KCL item whose child has one was finished (the
          KCL deletes the leases of finished parents): SHARD_END too.

       TRIM_HORIZON, LATEST
          Nothing processed yet: the row gets the same position, so the
          shard is read from where the old application would have started
          it, whatever the service's start position.

       AT_TIMESTAMP
          The KCL keeps the time in the application's configuration, not in
          the table: give it with --at-timestamp, or the import is refused.

       none (vmware-go-kcl before its first checkpoint, or no item)
          A free row without a checkpoint: the service's start position
          applies (a child of a split or merge starts at its beginning).

       Items of shards the stream no longer lists are skipped.

       Before writing, import reads the foreign table and the rows twice,
       --interval apart, and refuses (exit code 5, every reason listed,
       nothing written):

       o while the old application runs: an item changed between the reads;
       o to move a checkpoint of a row backwards;
       o to write a row that a live instance holds (one that heartbeated
         between the reads). A row held by an instance that did not
         heartbeat gets a rewind request, applied by its next holder.

       Running it again changes nothing: rows already written are unchanged.

       To move the application to a subscription given WithLeaseNamespace
       (a stream of another account or region), give its namespace with
       --lease-namespace: the checkpoints go into its rows,
       "<namespace>/<stream name>:<shard>", which it resumes from; the rows
       without a namespace are neither read nor written. Kinesis is still
       called with --stream, and both tables and the stream with one set
       of credentials and one region.

SYNOPSIS
            import
          --table <value>
          --stream <value>
          [--lease-namespace <value>]
          --from-table <value>
          [--format kcl|vmware-go-kcl]
          [--kcl-stream <value>]
          [--at-timestamp <value>]
          [--interval <value>]
          [--dry-run]
          [--force]
          [global options]

OPTIONS` + tableStreamHelp + leaseNamespaceHelp + `
       --from-table (string)
          The foreign lease table. It is read with Scan.

       --format (string)
          kcl (items keyed leaseKey) or vmware-go-kcl (keyed ShardID).
          Default: told by the items.

       --at-timestamp (string)
          The RFC 3339 time of the KCL application's AT_TIMESTAMP initial
          position, for shards whose checkpoint is AT_TIMESTAMP.
` + migrateOptionsHelp + globalOptionsHelp + `
OUTPUT
       One line per shard, e.g.

          shardId-000000000001: written - -> 4959...67 (source 4959...67 sub 0)
          shardId-000000000002: written - -> 4959...82/3 (source 4959...82 sub 2); a KPL aggregate of 6 user records
          shardId-000000000004: row created (source -); the source has no checkpoint: ...

       With --dry-run (and when refused) "would write", "would create the
       row", "would request from the holder".

EXAMPLES
       kinesislease import --table fulfilment-leases --stream fulfilment \
           --from-table fulfilment-kcl --dry-run

       kinesislease import --table fulfilment-leases --stream fulfilment \
           --from-table fulfilment-kcl --at-timestamp 2026-11-30T06:00:00Z

       kinesislease import --table fulfilment-leases --stream orders \
           --lease-namespace acct-b --from-table orders-kcl
` + exitCodesHelp

const exportHelp = `EXPORT()                                                              EXPORT()

NAME
       export - write a stream's checkpoints into a KCL lease table

DESCRIPTION
       The way back from import: stop the service, run export, start the
       KCL application on --to-table (an existing KCL table, or a new one
       with the string hash key leaseKey). Each shard with a checkpoint
       gets the item the KCL would have written, so that the KCL resumes
       right after the last record the service processed; importing the
       items again gives back exactly the checkpoints exported. Shards
       without a checkpoint are not exported. The item's leaseOwner is
       kept; leaseCounter is bumped, conditional on the one read.

       A checkpoint at AT_TIMESTAMP:<time> (written by a rewind) is
       exported as AT_TIMESTAMP: the KCL starts such a shard at its
       configured initial position; the line says which time ours had.

       Like import, export reads both tables twice, --interval apart, and
       refuses (exit code 5) while the service or the KCL application
       runs, or to move an item's checkpoint backwards.

       The checkpoints of a subscription given WithLeaseNamespace are those
       of its rows, "<namespace>/<stream name>:<shard>": give its namespace
       with --lease-namespace (without it, export reads the rows without a
       namespace).

SYNOPSIS
            export
          --table <value>
          --stream <value>
          [--lease-namespace <value>]
          --to-table <value>
          [--kcl-stream <value>]
          [--interval <value>]
          [--dry-run]
          [--force]
          [global options]

OPTIONS` + tableStreamHelp + leaseNamespaceHelp + `
       --to-table (string)
          The KCL lease table to write.
` + migrateOptionsHelp + globalOptionsHelp + `
EXAMPLES
       kinesislease export --table fulfilment-leases --stream fulfilment \
           --to-table fulfilment-kcl --dry-run
` + exitCodesHelp
