// Command kinesislease creates the DynamoDB lease table of services built
// with github.com/kinesislease/kinesislease, and shows and moves their shard
// leases: the rows ("stream:shard") of that table, and the fleet heartbeating
// in its membership rows.
//
// Install it with
//
//	go install github.com/kinesislease/kinesislease/cmd/kinesislease@latest
//
// Usage (flags in the style of the AWS CLI):
//
//	kinesislease init --table T [--point-in-time-recovery] [--tag K=V ...] [global options]
//	kinesislease status --table T --stream S [--json] [global options]
//	kinesislease members --table T [--interval D] [--json] [global options]
//	kinesislease rewind --table T --stream S --to POSITION [--shard ID] [--dry-run] [global options]
//	kinesislease import --table T --stream S --from-table F [--format kcl|vmware-go-kcl] [--kcl-stream ID] [--at-timestamp TIME] [--interval D] [--dry-run] [--force]
//	kinesislease export --table T --stream S --to-table K [--kcl-stream ID] [--interval D] [--dry-run] [--force]
//	kinesislease help [init|status|members|rewind|import|export]
//
// init creates the lease table (string partition key lease_key, on-demand
// billing), with point-in-time recovery and tags if asked, and waits until it
// is ACTIVE; an existing table is accepted if its key is right and refused
// (exit code 1, naming the key schema found) if not. It then prints the IAM
// statement the service needs on the table (dynamodb:GetItem and
// dynamodb:UpdateItem on its ARN). It needs dynamodb:CreateTable,
// DescribeTable and UpdateItem (it records when the table was born in the
// membership header), and UpdateContinuousBackups and TagResource with the
// options (see dynamo.CreateTable).
//
// status prints one line per shard of the stream: its lease holder and the
// holder's incarnation, counter, checkpoint, whether it reached SHARD_END,
// its parents, a pending rewind and how far the checkpoint is behind the tip
// of the shard.
// It reads only (dynamodb:GetItem; kinesis:ListShards, GetShardIterator,
// GetRecords).
//
// members prints one line per instance of the fleet, read from the table's
// membership header and rows: its row, owner id, incarnation, heartbeat (an
// opaque counter, not a time), whether it is leaving, the leases it holds and
// the shards it ended. With --interval it reads twice, that long apart, and
// says whose heartbeat advanced, stayed unchanged, joined or is gone. It
// reads only (dynamodb:GetItem).
//
// rewind moves checkpoints while the service runs, through the lease store's
// conditional writes only: a free row is rewritten at once; a held row gets a
// rewind request, and its holder, told through its membership entry, applies
// it within a heartbeat (after finishing the record in flight), so that no
// two readers ever read the shard. POSITION
// is TRIM_HORIZON, LATEST, an RFC 3339 time or a sequence number (with
// --shard). Run `kinesislease help rewind` for the details.
//
// import copies the checkpoints of a Java KCL (1.x, 2.x, 3.x) or
// vmware-go-kcl-v2 lease table into the stream's rows, and export writes the
// stream's checkpoints back into a KCL table; both refuse while an
// application still writes the tables, to move a checkpoint backwards or to
// write a row a live instance holds, unless --force (see the package
// migrate).
//
// Global options: --region, --profile, --endpoint-url, --dynamodb-endpoint-url,
// --kinesis-endpoint-url, --cli-read-timeout. With an endpoint URL (local
// emulators) the region defaults to us-east-1 and the credentials to the
// static pair test/test, unless the environment or --profile provides them.
//
// Exit codes:
//
//	0  success
//	1  a runtime or AWS error
//	2  bad usage or arguments (unknown option, missing --table, a time in the future, ...)
//	3  a resource was not found: the table, the stream or the shard
//	4  access denied
//	5  import, export: refused by a safety check; nothing written
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	c := &cli{ctx: ctx, stdout: os.Stdout, stderr: os.Stderr, now: time.Now}
	code := c.execute(os.Args[1:])
	stop()
	os.Exit(code)
}

func init() {
	commands = []*command{
		{name: "status", synopsis: statusSynopsis, help: statusHelp, run: (*cli).status},
		{name: "rewind", synopsis: rewindSynopsis, help: rewindHelp, run: (*cli).rewind},
		{name: "import", synopsis: importSynopsis, help: importHelp, run: (*cli).importCmd},
		{name: "export", synopsis: exportSynopsis, help: exportHelp, run: (*cli).exportCmd},
		{name: "init", synopsis: initSynopsis, help: initHelp, run: (*cli).initCmd},
		{name: "members", synopsis: membersSynopsis, help: membersHelp, run: (*cli).members},
	}
}
