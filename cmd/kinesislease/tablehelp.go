package main

// The help texts of init and members, the commands that call DynamoDB
// only, and the option and note they share.

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

       init calls dynamodb:CreateTable, dynamodb:DescribeTable and
       dynamodb:UpdateItem (to record when the table was born, so that a
       fleet's first start need not wait a timeout), and
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
       lists (strongly consistent GetItem only; with --stream, one
       ListShards per stream too) and prints one line per entry, sorted by
       row and owner:

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
       CAPACITY    its weight in the plan (WithCapacity, 1 by default);
                   "-" for an instance of a version before balancing by
                   load, which counts as 1.
       MAX_LEASES  its own cap (WithMaxLeases); "-" for none.
       LOAD_B/S    its load at its last heartbeat: the bytes per second
                   read from the shards it holds (a decayed average over
                   about a minute), to two significant digits; shown to
                   three (k = 1,000, M = 1,000,000).
       UTILIZATION its utilization of its capacity at its last heartbeat
                   (WithUtilization; 100% when fully used), a percentage;
                   "-" when it publishes none.
       COST        its cost factor in the plan by throughput: its cost
                   per byte (utilization x capacity over load) over the
                   fleet's, at least 1 and at most 3; 1 when it or the
                   fleet publishes no utilization. "-" for an entry
                   leaving or gone.
       SHARE       its part of its fleet's load: its LOAD_B/S over the sum
                   of the fleet's. Its fleet: the entries not leaving (nor
                   gone) that read the same streams, whom its plan shares
                   the shards with. "-" for an entry leaving or gone, or
                   while the fleet carries no load.
       FAIR_SHARE  the part the plan aims to give it: its capacity divided
                   by its COST, over the sum of the same of the fleet's (an
                   even part when an instance of the fleet publishes no
                   capacity: the fleet then plans by count; caps lower it,
                   see docs/balance.md). Balancing by throughput (the
                   default), the plan moves shards off an instance whose
                   load stays above its fair share by more than the
                   tolerance (20% by default).
       HOT         its hot shards (at most 4, each well above the mean load
                   of what it holds) as shard=bytes per second, hottest
                   first; "-" if none. The entry names each by a 6-digit
                   hash of its stream and shard: with --stream, the
                   shards of the streams named are shown by their ids
                   (stream/shard with several streams). An instance that
                   let go of a hot shard names it (and counts its load in
                   LOAD_B/S) until the new holder does, 30s at most: during
                   a handoff two instances may name one shard.

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
          [--stream <value> ...]
          [--json]
          [global options]

OPTIONS` + tableOnlyHelp + `
       --interval (duration)
          Read twice, this long apart (e.g. 10s), and show how each
          heartbeat changed. Default: 0, one read.

       --stream (string)
          A stream the fleet reads, by name or ARN; repeat for more. Its
          shards are listed (ListShards) to name the HOT shards by their
          ids. A stream that does not exist fails (exit code 3).

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
            capacity          number  null when the entry publishes none
            max_leases        number  0 for none
            load_bytes_per_s  number
            utilization       number  a fraction (0.62); null when the
                                      entry publishes none
            cost              number  1 to 3; null for an entry leaving
                                      or gone
            share             number  a fraction (0.25); null as "-" above
            fair_share        number  a fraction; null for an entry
                                      leaving or gone
            hot               [object] {"id", "bytes_per_s", and with
                                      --stream "stream", "shard"}
` + globalOptionsHelp + `
       Without --stream this command calls DynamoDB only:
       --kinesis-endpoint-url is accepted and unused.

EXAMPLES
       kinesislease members --table fulfilment-leases

       Which instances are alive:

       kinesislease members --table fulfilment-leases --interval 10s

       Which shards are hot, by name:

       kinesislease members --table fulfilment-leases --stream fulfilment

       kinesislease members --table fulfilment-leases --json |
           jq -r '.[] | select(.leaving | not) | .owner'
` + exitCodesHelp
