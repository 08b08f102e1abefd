package main

// The help texts, laid out like the AWS CLI's.

const topHelp = `KINESISLEASE()                                                  KINESISLEASE()

NAME
       kinesislease - create, show and move the shard leases of kinesislease
       services

DESCRIPTION
       Services built with github.com/kinesislease/kinesislease keep their
       shard leases in one DynamoDB table (string partition key lease_key):
       one row per shard of a stream, keyed "stream:shard", holding the
       instance that holds the lease and its incarnation (the lease holds
       while that incarnation heartbeats in the table's membership rows), a
       counter bumped by every write, the checkpoint (how far the shard is
       processed) and a pending rewind. kinesislease shows these rows next to the stream's
       shards, and moves checkpoints through the same conditional writes the
       services use, while they run.

SYNOPSIS
          kinesislease <command> [options]

AVAILABLE COMMANDS
       o init
          Create the lease table (string partition key lease_key,
          on-demand), or check an existing one; print the IAM statement the
          service needs on it.

       o status
          One line per shard: owner, incarnation, counter, checkpoint,
          SHARD_END, parents, pending rewind and lag. Read only.

       o members
          One line per instance of the fleet, from the table's membership
          rows: owner, incarnation, heartbeat, leaving, leases held, shards
          ended. Read only.

       o rewind
          Move checkpoints to replay or skip records: TRIM_HORIZON, LATEST,
          a time or a sequence number.

       o import
          Copy the checkpoints of a Java KCL or vmware-go-kcl lease table
          into the rows of a stream, to move a consumer to kinesislease.

       o export
          Write a stream's checkpoints into a KCL lease table, to move back.

       o help
          This text. "kinesislease help <command>" (or "kinesislease
          <command> --help") describes a command.
` + globalOptionsHelp + exitCodesHelp + `
IAM PERMISSIONS
       init: dynamodb:CreateTable and dynamodb:DescribeTable on the table;
       dynamodb:UpdateContinuousBackups with --point-in-time-recovery,
       dynamodb:TagResource with --tag.
       members: dynamodb:GetItem on the table.
       status: dynamodb:GetItem on the table; kinesis:ListShards,
       kinesis:GetShardIterator and kinesis:GetRecords on the stream.
       rewind: the same and dynamodb:UpdateItem on the table.
       import, export: the same, and dynamodb:Scan on the other table
       (export: dynamodb:GetItem and dynamodb:UpdateItem too).
       The service itself needs only dynamodb:GetItem and
       dynamodb:UpdateItem on the table.

INSTALL
          go install github.com/kinesislease/kinesislease/cmd/kinesislease@latest
`

const globalOptionsHelp = `
GLOBAL OPTIONS
       --region (string)
          The region. Default: AWS_REGION, AWS_DEFAULT_REGION or the
          profile's region; us-east-1 with an endpoint URL.

       --profile (string)
          A profile of the shared config and credentials files.

       --endpoint-url (string)
          Send the calls to both DynamoDB and Kinesis to this URL (an
          emulator serving both, e.g. http://127.0.0.1:4566). With any
          endpoint URL the credentials default to the static pair test/test
          unless AWS_ACCESS_KEY_ID, AWS_PROFILE or --profile provides some.

       --dynamodb-endpoint-url (string)
          Overrides --endpoint-url for DynamoDB (e.g. DynamoDB Local at
          http://127.0.0.1:8000).

       --kinesis-endpoint-url (string)
          Overrides --endpoint-url for Kinesis (e.g. kinesalite at
          http://127.0.0.1:4567).

       --cli-read-timeout (int)
          The longest one HTTP request may take, in seconds; 0 for no
          limit. Default: 60.
`

const exitCodesHelp = `
EXIT CODES
       0  success
       1  a runtime or AWS error
       2  bad usage or arguments: an unknown or missing option, a malformed
          or future time, a sequence number of another shard
       3  a resource was not found: the table, the stream or the shard
       4  access denied (or credentials the service does not accept)
       5  import, export: refused by a safety check; nothing written
`

const tableStreamHelp = `
       --table (string)
          The DynamoDB lease table of the service.

       --stream (string)
          The stream, by name or ARN: the rows are keyed by its name, however
          the service subscribes to it.
`

const statusHelp = `STATUS()                                                              STATUS()

NAME
       status - show the lease of every shard of a stream

DESCRIPTION
       Prints one line per shard of the stream (every shard ListShards
       returns, closed ones included), sorted by shard id:

       SHARD       the shard id.
       OWNER       the instance holding the lease; "-" when it is free.
       INCARNATION the holder's process (a new one at every start of the
                   owner); "-" when free. The lease stays held while that
                   incarnation heartbeats in the table's membership rows.
       COUNTER     the row's lease_counter, bumped by every write; "-" when
                   no instance has created the shard's row yet.
       CHECKPOINT  how far the shard is processed: a sequence number
                   ("seq/n" inside a KPL aggregate: n user records done),
                   SHARD_END, "-" (none yet: the service's start position
                   applies), or a position written by a rewind that the
                   next processed record replaces: TRIM_HORIZON, LATEST,
                   AT_SEQUENCE_NUMBER:<seq>, AT_TIMESTAMP:<time>.
       SHARD_END   "yes" when the shard was read to its end.
       PARENTS     the shard's parents (a split or merge; "a,b" for a
                   merge), "-" if none. A child is read only once every
                   parent is at SHARD_END.
       REWIND      a rewind requested from the holder, which applies it
                   within a heartbeat; "-" if none.
       LAG         how far the checkpoint is behind the tip of the shard:
                   the MillisBehindLatest of one GetRecords (Limit 1) read
                   right after the checkpoint (from TRIM_HORIZON when there
                   is none); "-" at SHARD_END; "?" when it could not be
                   read (the reason goes to stderr, with a non-zero exit
                   code, after the table). Like Kinesis' own metric it is
                   0s both when caught up and when the one record left is
                   the newest (--json tells them apart: caught_up).

       status only reads: one ListShards, one GetItem per shard, and one
       GetShardIterator and one GetRecords per shard not at SHARD_END
       (counting against the shard's 5 GetRecords per second, shared with
       the service).

SYNOPSIS
            status
          --table <value>
          --stream <value>
          [--json]
          [global options]

OPTIONS` + tableStreamHelp + `
       --json (boolean)
          Print a JSON array instead, one object per shard, with these
          stable fields:

            shard_id            string
            row_exists          bool    false: no row yet
            owner               string  "" when free
            incarnation         string  "" when free
            counter             number  0 without a row
            checkpoint          string  sequence number, SHARD_END, a
                                        rewind position (AT_TIMESTAMP:<unix
                                        ms>, ...) or ""
            sub_sequence        number
            checkpoint_pending  bool    checkpoint is a rewind position
            shard_end           bool
            closed              bool    the stream closed the shard
            parents             [string]
            pending_rewind      string  "" if none
            lag_ms              number  null at SHARD_END or when unknown
            caught_up           bool    no record after the checkpoint;
                                        null when lag_ms is
            lag_error           string  only when lag_ms could not be read
` + globalOptionsHelp + `
EXAMPLES
       kinesislease status --table fulfilment-leases --stream fulfilment

       kinesislease status --table fulfilment-leases --stream fulfilment --json |
           jq -r '.[] | select(.owner == "" and (.shard_end | not)) | .shard_id'

       On the local emulators:

       kinesislease status --table fulfilment-leases --stream fulfilment \
           --dynamodb-endpoint-url http://127.0.0.1:8000 \
           --kinesis-endpoint-url http://127.0.0.1:4567
` + exitCodesHelp

const rewindHelp = `REWIND()                                                              REWIND()

NAME
       rewind - move shard checkpoints to replay or skip records

DESCRIPTION
       Moves the checkpoint of every shard of the stream, or of the one
       --shard names, while the service runs. It writes only through the
       lease store's conditional writes (DynamoDB UpdateItem on the row's
       counter), never around a holder:

       o A free row is rewritten at once: the next instance to take the
         lease reads from the new position.

       o A held row gets a rewind request, and its holder is told through
         its membership entry (its notice is bumped, one more UpdateItem).
         It sees the request within a heartbeat, finishes the record in
         flight, moves the checkpoint itself and reads on from the new
         position, keeping its lease: the shard never has two readers. If
         the holder died, the instance that takes the lease over applies
         the request before reading.

       o A shard without a row (no instance reached it yet) gets its row
         created free and rewritten, so that the first instance to take it
         starts at the position instead of the service's start position.

       A write that races an instance (a checkpoint, a take, a release) fails
       its condition; rewind then reads the row again and retries, up to 5
       times. Every shard's position is resolved, and every argument
       checked, before anything is written.

       --to takes:

       TRIM_HORIZON
          Replay every record the shard still holds.

       LATEST
          Skip every record the shard holds when the rewind is applied.

       an RFC 3339 time (2024-05-01T10:00:00Z, 2024-05-01T12:00:00.5+02:00)
          Replay from the first record that arrived at or after it. The time
          is resolved now, per shard (GetShardIterator AT_TIMESTAMP, then
          GetRecords), into that record's sequence number, so that status
          shows where each shard restarts. A shard with no record at or
          after the time yet keeps the time itself (AT_TIMESTAMP:<time>):
          every record arriving later is read, including those arriving
          before the holder applies the rewind, which LATEST would skip. A
          closed shard at SHARD_END with nothing at or after the time is
          left unchanged. A time in the future is refused.

       a sequence number (with --shard)
          Replay from that record, included. It must be a sequence number
          of that shard (checked with GetShardIterator AT_SEQUENCE_NUMBER).

       Rewinding a parent of a split or merge whose children are being read
       replays the parent's records alongside its children's: per-key order
       across the reshard holds only for children not started yet.

SYNOPSIS
            rewind
          --table <value>
          --stream <value>
          --to <value>
          [--shard <value>]
          [--dry-run]
          [global options]

OPTIONS` + tableStreamHelp + `
       --to (string)
          TRIM_HORIZON, LATEST, an RFC 3339 time or a sequence number.

       --shard (string)
          Rewind only this shard (e.g. shardId-000000000001). Required with
          a sequence number. A shard the stream does not list is refused
          (exit code 3).

       --dry-run (boolean)
          Resolve the positions and read the rows, then say what would be
          done; write nothing.
` + globalOptionsHelp + `
OUTPUT
       One line per shard:

          <shard>: rewritten (free): <from> -> <to>
          <shard>: requested from <owner>: <from> -> <to>; it applies the rewind within a heartbeat
          <shard>: row created, rewritten (free): - -> <to>
          <shard>: unchanged: SHARD_END; the shard is closed and holds no record at or after <to>

       followed, for a time, by how it was resolved. With --dry-run:
       "would rewrite", "would request from", "would create". Use status to
       watch the requests being applied (the REWIND column empties).

EXAMPLES
       Replay one shard from a record on:

       kinesislease rewind --table fulfilment-leases --stream fulfilment \
           --shard shardId-000000000001 \
           --to 49590338271490256608559692538361571095921575989136588898

       Replay the last hour of every shard:

       kinesislease rewind --table fulfilment-leases --stream fulfilment \
           --to "$(date -u -d '1 hour ago' +%Y-%m-%dT%H:%M:%SZ)"

       Skip a backlog:

       kinesislease rewind --table fulfilment-leases --stream fulfilment --to LATEST
` + exitCodesHelp

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

SYNOPSIS
            import
          --table <value>
          --stream <value>
          --from-table <value>
          [--format kcl|vmware-go-kcl]
          [--kcl-stream <value>]
          [--at-timestamp <value>]
          [--interval <value>]
          [--dry-run]
          [--force]
          [global options]

OPTIONS` + tableStreamHelp + `
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

SYNOPSIS
            export
          --table <value>
          --stream <value>
          --to-table <value>
          [--kcl-stream <value>]
          [--interval <value>]
          [--dry-run]
          [--force]
          [global options]

OPTIONS` + tableStreamHelp + `
       --to-table (string)
          The KCL lease table to write.
` + migrateOptionsHelp + globalOptionsHelp + `
EXAMPLES
       kinesislease export --table fulfilment-leases --stream fulfilment \
           --to-table fulfilment-kcl --dry-run
` + exitCodesHelp

const tableOnlyHelp = `
       --table (string)
          The DynamoDB lease table of the service.
`

const tableOnlyGlobalsNote = `
       This command calls DynamoDB only: --kinesis-endpoint-url is accepted
       and unused.
`

const initHelp = `INIT()                                                                  INIT()

NAME
       init - create the lease table

DESCRIPTION
       Creates the DynamoDB lease table a service runs on: string partition
       key lease_key, no sort key, on-demand billing (PAY_PER_REQUEST); waits
       until it is ACTIVE; with the options, turns point-in-time recovery on
       and tags it. Then prints the IAM policy statement the service needs on
       the table (the README's "KinesisLeaseTable": dynamodb:GetItem and
       dynamodb:UpdateItem, on the table's ARN as DescribeTable gives it).

       Running it again is safe: a table that exists already is described
       instead, and accepted if its key is the string partition key
       lease_key alone ("already exists and matches"); its billing mode is
       left as it is, and the options are applied to it
       (UpdateContinuousBackups, TagResource: a tag's value is overwritten,
       other tags stay). A table of that name with another key (a KCL table,
       keyed leaseKey, say) is refused, exit code 1, with the key schema
       found and wanted; nothing is changed.

       init calls dynamodb:CreateTable and dynamodb:DescribeTable, and
       dynamodb:UpdateContinuousBackups and dynamodb:TagResource with the
       options: permissions for whoever sets up the table (a deploy role),
       which the service does not need.

       DynamoDB Local has neither point-in-time recovery nor tags:
       --point-in-time-recovery fails there (UnknownOperationException,
       exit code 1, after the table was created), and --tag is dropped on a
       new table and fails on an existing one.

SYNOPSIS
            init
          --table <value>
          [--point-in-time-recovery]
          [--tag <key>=<value> ...]
          [global options]

OPTIONS` + tableOnlyHelp + `
       --point-in-time-recovery (boolean)
          Turn on point-in-time recovery (continuous backups, billed by
          DynamoDB) on the table, new or existing. Without it an existing
          table's setting is left alone.

       --tag (string)
          A tag key=value for the table; repeat for more.
` + globalOptionsHelp + tableOnlyGlobalsNote + `
OUTPUT
          table "fulfilment-leases": created: key HASH lease_key (S), billing PAY_PER_REQUEST, ACTIVE
          point-in-time recovery: enabled
          tags written: team=fulfilment
          ARN: arn:aws:dynamodb:eu-west-1:123456789012:table/fulfilment-leases

       ("already exists and matches" for a table found), then the policy:

          {
            "Version": "2012-10-17",
            "Statement": [
              {"Sid": "KinesisLeaseTable", "Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"],
               "Resource": "arn:aws:dynamodb:eu-west-1:123456789012:table/fulfilment-leases"}
            ]
          }

EXAMPLES
       kinesislease init --table fulfilment-leases

       kinesislease init --table fulfilment-leases --point-in-time-recovery \
           --tag team=fulfilment --tag env=prod

       On DynamoDB Local:

       kinesislease init --table fulfilment-leases \
           --dynamodb-endpoint-url http://127.0.0.1:8000
` + exitCodesHelp

const membersHelp = `MEMBERS()                                                            MEMBERS()

NAME
       members - show the instances of the fleet

DESCRIPTION
       Every instance of a service heartbeats in a membership row of the
       lease table (items "#members:<row>", up to 8 instances each; the item
       "#members" lists the rows). members reads the header and each row it
       lists (strongly consistent GetItem only) and prints one line per
       entry, sorted by row and owner:

       ROW         the membership row the entry is in.
       OWNER       the instance's owner id.
       INCARNATION its current process (a new one at every start). The
                   leases it holds name this incarnation.
       HEARTBEAT   a counter the incarnation advances at every heartbeat
                   (every 1.25s by default). It is not a time: its age
                   cannot be told from one read. The other instances judge
                   an incarnation dead when it stays unchanged for their
                   timeout (5s by default) on their own clock.
       CHANGE      only with --interval: "advanced" (it heartbeated between
                   the two reads: alive), "unchanged" (it did not: dead, or
                   cut off from DynamoDB, if the interval is longer than the
                   service's timeout), "joined" (a new entry, or a new
                   incarnation, in the second read), "gone" (the entry was
                   removed between the reads: it left, or was removed as
                   dead; the line shows the first read).
       LEAVING     "yes": the instance is shutting down, or was found dead
                   and marked so; it holds no lease any more, or is
                   releasing its last ones.
       HELD        the leases it held at its last heartbeat.
       ENDED       the shards it read to their end (SHARD_END).

       One read (the default) shows the fleet as it is now and costs one
       GetItem for the header and one per row. To tell which instances are
       alive, pass --interval: members reads everything twice, that long
       apart, and shows the second read with the CHANGE column. Use an
       interval longer than the service's timeout (10s for the defaults)
       for "unchanged" to mean what the fleet would conclude.

       A table no service has run on has no members: members prints the
       header line alone and says so on stderr (exit code 0).

SYNOPSIS
            members
          --table <value>
          [--interval <value>]
          [--json]
          [global options]

OPTIONS` + tableOnlyHelp + `
       --interval (duration)
          Read twice, this long apart (e.g. 10s), and show how each
          heartbeat changed. Default: 0, one read.

       --json (boolean)
          Print a JSON array instead, one object per entry, with these
          stable fields:

            row               number
            owner             string
            incarnation       string
            heartbeat         number  an opaque counter, not a time
            heartbeat_change  string  advanced, unchanged, joined or gone;
                                      null without --interval
            leaving           bool
            held              number
            ended             number
            young             bool    the entry stood for less than the
                                      instance's timeout when it last
                                      heartbeated (it joined recently)
` + globalOptionsHelp + tableOnlyGlobalsNote + `
EXAMPLES
       kinesislease members --table fulfilment-leases

       Which instances are alive:

       kinesislease members --table fulfilment-leases --interval 10s

       kinesislease members --table fulfilment-leases --json |
           jq -r '.[] | select(.leaving | not) | .owner'
` + exitCodesHelp
