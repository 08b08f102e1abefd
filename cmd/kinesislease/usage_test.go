package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

// TestBadInput checks the exit codes and messages of wrong command lines
// and missing resources.
func TestBadInput(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 2)
	ps := putRecords(t, r.kc, r.stream, 0, 4, alternate)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	otherShardSeq := ps[1].seq // a record of shardId-000000000001
	if ps[1].shard != "shardId-000000000001" {
		t.Fatalf("record 1 went to %s", ps[1].shard)
	}
	withTable := func(table string, args []string) []string {
		args = append([]string(nil), args...)
		args[2] = table
		return args
	}
	withStream := func(stream string, args []string) []string {
		args = append([]string(nil), args...)
		args[4] = stream
		return args
	}

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string // substrings of stderr
		usage  bool     // stderr starts with the usage
	}{
		{"unknown shard", r.args("rewind", "--shard", "shardId-000000000009", "--to", "TRIM_HORIZON"), exitNotFound,
			[]string{"shardId-000000000009", `stream "` + r.stream + `"`, "shardId-000000000000, shardId-000000000001"}, false},
		{"time in the future", r.args("rewind", "--to", future), exitUsage,
			[]string{future, "in the future", "--to LATEST"}, false},
		{"malformed time", r.args("rewind", "--to", "2024-13-45T99:00:00Z"), exitUsage,
			[]string{"2024-13-45T99:00:00Z", "RFC 3339"}, false},
		{"sequence number without --shard", r.args("rewind", "--to", ps[0].seq), exitUsage,
			[]string{"--shard"}, false},
		{"sequence number of another shard", r.args("rewind", "--shard", "shardId-000000000000", "--to", otherShardSeq), exitUsage,
			[]string{otherShardSeq, "shardId-000000000000", r.stream, "InvalidArgumentException"}, false},
		{"missing table, status", withTable("no-such-table", r.args("status")), exitNotFound,
			[]string{`table "no-such-table" not found`, r.stream}, false},
		{"missing table, rewind", withTable("no-such-table", r.args("rewind", "--to", "LATEST")), exitNotFound,
			[]string{`table "no-such-table" not found`, r.stream, "shardId-000000000000"}, false},
		{"missing stream", withStream("no-such-stream", r.args("status")), exitNotFound,
			[]string{`stream "no-such-stream" not found`}, false},
		{"unknown flag", r.args("status", "--bogus"), exitUsage,
			[]string{"unknown options: --bogus", "kinesislease status help"}, true},
		{"flag without its value", []string{"status", "--table"}, exitUsage,
			[]string{"argument --table: expected one argument"}, true},
		{"missing --table and --stream", []string{"status"}, exitUsage,
			[]string{"the following arguments are required: --table, --stream"}, true},
		{"missing --to", r.args("rewind"), exitUsage,
			[]string{"the following arguments are required: --to"}, true},
		{"extra argument", r.args("status", "extra"), exitUsage,
			[]string{"unknown options: extra"}, true},
		{"unknown command", []string{"stauts"}, exitUsage,
			[]string{`invalid choice: "stauts"`}, true},
		{"no command", nil, exitUsage,
			[]string{"the following arguments are required: command"}, true},
		{"bad endpoint", []string{"status", "--table", "t", "--stream", "s", "--endpoint-url", "localhost:8000"}, exitUsage,
			[]string{"--endpoint-url", "localhost:8000"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(tc.args...)
			if res.code != tc.code {
				t.Fatalf("exit code %d, want %d\n%v", res.code, tc.code, res)
			}
			if res.stdout != "" {
				t.Errorf("stdout %q, want nothing", res.stdout)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(res.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, res.stderr)
				}
			}
			if tc.usage != strings.HasPrefix(res.stderr, "usage: kinesislease") {
				t.Errorf("usage printed: %v, want %v:\n%s", !tc.usage, tc.usage, res.stderr)
			}
		})
	}

	// Access denied (injected: the emulators accept any credentials).
	var f testutil.Faults
	f.Inject(testutil.Fault{Op: "GetItem", Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:GetItem"}})
	res := runWith(&cli{dynamoOpts: []func(*dynamodb.Options){f.DynamoOptions}}, r.args("status")...)
	if res.code != exitDenied || !strings.Contains(res.stderr, "access denied") || !strings.Contains(res.stderr, r.table) {
		t.Errorf("status with GetItem denied: %v, want exit code %d naming the table", res, exitDenied)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"help"}, {"--help"}, {"-h"},
		{"help", "status"}, {"status", "--help"}, {"status", "-h"}, {"status", "help"},
		{"help", "rewind"}, {"rewind", "--help"}, {"rewind", "help"},
		{"help", "init"}, {"init", "--help"}, {"init", "help"},
		{"help", "members"}, {"members", "--help"}, {"members", "-h"},
	} {
		res := runCLI(args...)
		if res.code != 0 || res.stderr != "" {
			t.Errorf("%q: %v", args, res)
			continue
		}
		for _, s := range []string{"NAME", "SYNOPSIS", "EXIT CODES", "--region", "--endpoint-url", "4  access denied"} {
			if !strings.Contains(res.stdout, s) {
				t.Errorf("%q: the help lacks %q", args, s)
			}
		}
	}
	if res := runCLI("rewind", "--help"); !strings.Contains(res.stdout, "--dry-run") || !strings.Contains(res.stdout, "TRIM_HORIZON") {
		t.Errorf("rewind --help lacks --dry-run or TRIM_HORIZON")
	}
	if res := runCLI("status", "--help"); !strings.Contains(res.stdout, "lag_ms") {
		t.Errorf("status --help does not describe the JSON fields")
	}
	if res := runCLI("members", "--help"); !strings.Contains(res.stdout, "heartbeat_change") || !strings.Contains(res.stdout, "--interval") {
		t.Errorf("members --help does not describe --interval and the JSON fields")
	}
	if res := runCLI("init", "--help"); !strings.Contains(res.stdout, "KinesisLeaseTable") || !strings.Contains(res.stdout, "--point-in-time-recovery") {
		t.Errorf("init --help does not describe the policy and --point-in-time-recovery")
	}
	top := runCLI("help").stdout
	for _, s := range []string{"o init", "o members", "dynamodb:CreateTable", "dynamodb:UpdateContinuousBackups", "dynamodb:TagResource", "members: dynamodb:GetItem"} {
		if !strings.Contains(top, s) {
			t.Errorf("the top help lacks %q", s)
		}
	}
	if res := runCLI("help", "nope"); res.code != exitUsage || !strings.Contains(res.stderr, "choose from status, rewind, import, export, init, members, help") {
		t.Errorf("help nope: %v", res)
	}
}
