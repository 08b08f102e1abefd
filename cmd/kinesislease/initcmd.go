package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

const initSynopsis = "init --table <value> [--point-in-time-recovery] [--tag <key>=<value> ...] [global options]"

// tagFlag is --tag key=value, repeated.
type tagFlag map[string]string

func (f tagFlag) String() string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		kv = append(kv, k+"="+f[k])
	}
	return strings.Join(kv, ",")
}

func (f tagFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	f[k] = v
	return nil
}

func (c *cli) initCmd(args []string) int {
	cmd := commandNamed("init")
	g := globals{tableOnly: true}
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	g.register(fs)
	pitr := fs.Bool("point-in-time-recovery", false, "")
	tags := tagFlag{}
	fs.Var(tags, "tag", "")
	if done, code := c.parse(cmd, fs, args); done {
		return code
	}
	if err := g.check(); err != nil {
		return c.usageError(cmd, err.Error())
	}
	s, err := c.connect(&g)
	if err != nil {
		return c.fail("init", err)
	}
	defer s.close()
	var opts []dynamo.TableOption
	if *pitr {
		opts = append(opts, dynamo.WithPointInTimeRecovery())
	}
	if len(tags) > 0 {
		opts = append(opts, dynamo.WithTableTags(tags))
	}
	t, err := dynamo.CreateTable(c.ctx, s.ddb, g.table, opts...)
	if t.Name != "" {
		// The table is there (an option may have failed after): say so.
		writeTableDone(c.stdout, t)
	}
	if err != nil {
		if errors.Is(err, leases.ErrMisconfigured) {
			// Another table of that name: exit code 1, and the message
			// names both key schemas.
			return c.fail("init", fmt.Errorf("%w; nothing was changed", err))
		}
		return c.fail("init", err)
	}
	fmt.Fprintln(c.stdout)
	fmt.Fprintln(c.stdout, `The service needs only this on the table (the README's "KinesisLeaseTable" statement):`)
	fmt.Fprintln(c.stdout)
	fmt.Fprint(c.stdout, leaseTablePolicy(tableARN(t, s.region)))
	return exitOK
}

// writeTableDone says what CreateTable did to table t.
func writeTableDone(w io.Writer, t dynamo.Table) {
	what := "already exists and matches"
	if t.Created {
		what = "created"
	}
	billing := string(t.BillingMode)
	if !t.Created && t.BillingMode != "PAY_PER_REQUEST" {
		billing += " (left as it is)"
	}
	fmt.Fprintf(w, "table %q: %s: key HASH lease_key (S), billing %s, ACTIVE\n", t.Name, what, billing)
	if t.PointInTimeRecovery {
		fmt.Fprintln(w, "point-in-time recovery: enabled")
	}
	if len(t.Tags) > 0 {
		fmt.Fprintf(w, "tags written: %s\n", tagFlag(t.Tags).String())
	}
	if t.ARN != "" {
		fmt.Fprintf(w, "ARN: %s\n", t.ARN)
	}
	if !t.Born.IsZero() {
		fmt.Fprintf(w, "born: %s (recorded in the membership header: a fleet started more than two timeouts later need not wait a timeout for a new stream)\n", t.Born.UTC().Format(time.RFC3339))
	}
}

// tableARN is t's ARN, or one with the region (when known) and
// placeholders.
func tableARN(t dynamo.Table, region string) string {
	if t.ARN != "" {
		return t.ARN
	}
	if region == "" {
		region = "REGION"
	}
	return "arn:aws:dynamodb:" + region + ":ACCOUNT_ID:table/" + t.Name
}

// leaseTablePolicy is the README's KinesisLeaseTable statement on arn, in
// a policy document.
func leaseTablePolicy(arn string) string {
	return `{
  "Version": "2012-10-17",
  "Statement": [
    {"Sid": "KinesisLeaseTable", "Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"],
     "Resource": "` + arn + `"}
  ]
}
`
}
