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
          SHARD_END, parents, pending rewind, lag and throughput. Read
          only.

       o members
          One line per instance of the fleet, from the table's membership
          rows: owner, incarnation, heartbeat, leaving, leases held, shards
          ended, capacity, cap, load, utilization and cost, its share of
          the fleet's load beside its fair share, hot shards. Read only.

       o rewind
          Move checkpoints to replay or skip records: TRIM_HORIZON, LATEST,
          a time or a sequence number.

       o import
          Copy the checkpoints of a Java KCL or vmware-go-kcl lease table
          into the rows of a stream, to move a consumer to kinesislease.

       o export
          Write a stream's checkpoints into a KCL lease table, to move back.

       status, rewind, import and export reach the rows of a subscription
       given WithLeaseNamespace with --lease-namespace.

       o help
          This text. "kinesislease help <command>" (or "kinesislease
          <command> --help") describes a command.
` + globalOptionsHelp + exitCodesHelp + `
IAM PERMISSIONS
       init: dynamodb:CreateTable, dynamodb:DescribeTable and
       dynamodb:UpdateItem (the table's birth, in its header) on the table;
       dynamodb:UpdateContinuousBackups with --point-in-time-recovery,
       dynamodb:TagResource with --tag.
       members: dynamodb:GetItem on the table; kinesis:ListShards on the
       streams of --stream.
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

const leaseNamespaceHelp = `
       --lease-namespace (string)
          The lease namespace of the subscription (WithLeaseNamespace): its
          rows are keyed "<namespace>/<stream name>:<shard>" instead of
          "<stream name>:<shard>", so that streams of one name in two
          accounts or regions have rows of their own in one table. Default:
          none (the rows of a subscription without a namespace). Kinesis
          and DynamoDB are called with the same credentials and region
          (--profile, --region): for a stream of another account, use a
          profile whose credentials may read both the stream and the table.
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
       BYTES/S     the shard's throughput as its holder last wrote it on
       RECORDS/S   the row: bytes and records per second read, a decayed
                   average over about a minute, written with the holder's
                   checkpoints and its release (no write of its own); "-"
                   when the row holds none (idle, or written by a version
                   before balancing by load). Shown to three significant
                   digits (k = 1,000, M = 1,000,000); --json has them
                   exact. The service's plan balances these loads
                   (docs/balance.md).

       status only reads: one ListShards, one GetItem per shard, and one
       GetShardIterator and one GetRecords per shard not at SHARD_END
       (counting against the shard's 5 GetRecords per second, shared with
       the service).

SYNOPSIS
            status
          --table <value>
          --stream <value>
          [--lease-namespace <value>]
          [--json]
          [global options]

OPTIONS` + tableStreamHelp + leaseNamespaceHelp + `
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
            bytes_per_s         number  the row's throughput; 0 when none
            records_per_s       number
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
          [--lease-namespace <value>]
          --to <value>
          [--shard <value>]
          [--dry-run]
          [global options]

OPTIONS` + tableStreamHelp + leaseNamespaceHelp + `
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
