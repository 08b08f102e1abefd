package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// tableArgs returns a command line for cmd on table, on DynamoDB Local.
func tableArgs(t *testing.T, cmd, table string, extra ...string) []string {
	return append([]string{cmd, "--table", table, "--region", testutil.Region,
		"--dynamodb-endpoint-url", testutil.Endpoint(t, testutil.DynamoDBLocal)}, extra...)
}

// deleteTableAtCleanup deletes table when the test ends.
func deleteTableAtCleanup(t *testing.T, client *dynamodb.Client, table string) {
	t.Cleanup(func() {
		_, err := client.DeleteTable(testutil.WithoutFaults(context.Background()), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		var notFound *dtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &notFound) {
			t.Errorf("deleting table %s: %v", table, err)
		}
	})
}

// policyOf parses the policy init printed after its report.
func policyOf(t *testing.T, stdout string) (sid, resource string, actions []string) {
	t.Helper()
	i := strings.Index(stdout, "\n{")
	if i < 0 {
		t.Fatalf("no policy in:\n%s", stdout)
	}
	var p struct {
		Version   string
		Statement []struct {
			Sid, Effect, Resource string
			Action                []string
		}
	}
	if err := json.Unmarshal([]byte(stdout[i:]), &p); err != nil {
		t.Fatalf("the policy is not JSON: %v\n%s", err, stdout[i:])
	}
	if p.Version != "2012-10-17" || len(p.Statement) != 1 || p.Statement[0].Effect != "Allow" {
		t.Fatalf("policy %+v", p)
	}
	return p.Statement[0].Sid, p.Statement[0].Resource, p.Statement[0].Action
}

// TestInit creates a table, runs init again on it, and checks that a
// store works on it and that init called only CreateTable and
// DescribeTable.
func TestInit(t *testing.T) {
	t.Parallel()
	client := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	deleteTableAtCleanup(t, client, table)
	var f testutil.Faults

	res := runWith(&cli{dynamoOpts: []func(*dynamodb.Options){f.DynamoOptions}}, tableArgs(t, "init", table)...)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("init: %v", res)
	}
	t.Logf("init:\n%s", res.stdout)
	want := `table "` + table + `": created: key HASH lease_key (S), billing PAY_PER_REQUEST, ACTIVE`
	if !strings.HasPrefix(res.stdout, want+"\n") {
		t.Errorf("init's first line is not %q:\n%s", want, res.stdout)
	}
	sid, resource, actions := policyOf(t, res.stdout)
	if sid != "KinesisLeaseTable" || !strings.HasPrefix(resource, "arn:aws:dynamodb:") || !strings.HasSuffix(resource, ":table/"+table) ||
		strings.Join(actions, ",") != "dynamodb:GetItem,dynamodb:UpdateItem" {
		t.Errorf("statement %s on %s: %v", sid, resource, actions)
	}
	if !strings.Contains(res.stdout, "ARN: "+resource+"\n") {
		t.Errorf("init does not print the ARN %s:\n%s", resource, res.stdout)
	}
	for _, op := range f.Ops() {
		if op != "CreateTable" && op != "DescribeTable" && op != "UpdateItem" { // UpdateItem: born, in the membership header
			t.Errorf("init called %s", op)
		}
	}

	// A store works on it.
	st := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client))
	if err := st.Check(context.Background()); err != nil {
		t.Fatalf("Check on the table init made: %v", err)
	}

	// Again: it is found.
	res = runCLI(tableArgs(t, "init", table)...)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("init again: %v", res)
	}
	want = `table "` + table + `": already exists and matches: key HASH lease_key (S), billing PAY_PER_REQUEST, ACTIVE`
	if !strings.HasPrefix(res.stdout, want+"\n") {
		t.Errorf("init again: first line not %q:\n%s", want, res.stdout)
	}
	if _, resource2, _ := policyOf(t, res.stdout); resource2 != resource {
		t.Errorf("init again: policy on %s, want %s", resource2, resource)
	}
}

// TestInitRefused: a table with another key, an option DynamoDB Local
// lacks, access denied, and bad command lines.
func TestInitRefused(t *testing.T) {
	t.Parallel()
	client := testutil.DynamoClient(t)

	t.Run("wrong key schema", func(t *testing.T) {
		t.Parallel()
		table := testutil.TableName(t)
		testutil.CreateKeyedTable(t, client, table, "leaseKey")
		res := runCLI(tableArgs(t, "init", table, "--point-in-time-recovery")...)
		if res.code != exitError || res.stdout != "" {
			t.Fatalf("init on a table keyed leaseKey: %v, want exit code %d and no output", res, exitError)
		}
		for _, s := range []string{"kinesislease init: ", `"` + table + `"`, "key schema HASH leaseKey (S), want HASH lease_key (S)", "nothing was changed"} {
			if !strings.Contains(res.stderr, s) {
				t.Errorf("stderr lacks %q:\n%s", s, res.stderr)
			}
		}
	})

	t.Run("no point-in-time recovery on DynamoDB Local", func(t *testing.T) {
		t.Parallel()
		table := testutil.TableName(t)
		deleteTableAtCleanup(t, client, table)
		res := runCLI(tableArgs(t, "init", table, "--point-in-time-recovery")...)
		if res.code != exitError || !strings.Contains(res.stdout, `": created:`) || strings.Contains(res.stdout, "KinesisLeaseTable") ||
			!strings.Contains(res.stderr, "point-in-time recovery") || !strings.Contains(res.stderr, "UnknownOperationException") {
			t.Errorf("init --point-in-time-recovery on DynamoDB Local: %v; want the table created, then exit code 1", res)
		}
	})

	t.Run("access denied", func(t *testing.T) {
		t.Parallel()
		table := testutil.TableName(t)
		var f testutil.Faults
		f.Inject(testutil.Fault{Op: "CreateTable", Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:CreateTable"}})
		res := runWith(&cli{dynamoOpts: []func(*dynamodb.Options){f.DynamoOptions}}, tableArgs(t, "init", table)...)
		if res.code != exitDenied || !strings.Contains(res.stderr, table) || !strings.Contains(res.stderr, "dynamodb:CreateTable") || res.stdout != "" {
			t.Errorf("init with CreateTable denied: %v, want exit code %d naming the table", res, exitDenied)
		}
	})

	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"missing --table", []string{"init"}, "the following arguments are required: --table"},
		{"--stream", []string{"init", "--table", "t-leases", "--stream", "s"}, "unknown options: --stream"},
		{"bad tag", []string{"init", "--table", "t-leases", "--tag", "team"}, `argument "team" for --tag: want key=value`},
		{"empty tag key", []string{"init", "--table", "t-leases", "--tag", "=x"}, `want key=value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(tc.args...)
			if res.code != exitUsage || !strings.HasPrefix(res.stderr, "usage: kinesislease init") || !strings.Contains(res.stderr, tc.stderr) {
				t.Errorf("%q: %v; want exit code 2, the usage and %q", tc.args, res, tc.stderr)
			}
		})
	}
	res := runCLI(tableArgs(t, "init", "a!")...)
	if res.code != exitError || !strings.Contains(res.stderr, `"a!"`) {
		t.Errorf("init --table a!: %v", res)
	}
}

// TestLeaseTablePolicy: without an ARN, the region and placeholders.
func TestLeaseTablePolicy(t *testing.T) {
	t.Parallel()
	_, resource, _ := policyOf(t, "x\n"+leaseTablePolicy(tableARN(dynamo.Table{Name: "t1"}, "eu-west-1")))
	if resource != "arn:aws:dynamodb:eu-west-1:ACCOUNT_ID:table/t1" {
		t.Errorf("resource %s", resource)
	}
	if got := tableARN(dynamo.Table{Name: "t1"}, ""); got != "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/t1" {
		t.Errorf("resource %s", got)
	}
}
