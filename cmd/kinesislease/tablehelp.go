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
