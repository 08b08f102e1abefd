package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/rewind"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

const rewindSynopsis = "rewind --table <value> --stream <value> [--lease-namespace <value>] --to <value> [--shard <value>] [--dry-run] [global options]"

// parseTarget parses --to: TRIM_HORIZON, LATEST, an RFC 3339 time (not in
// the future) or a sequence number.
func parseTarget(s string, now time.Time) (kltype.StartPosition, error) {
	switch strings.ToUpper(s) {
	case leases.RewindTrimHorizon:
		return kltype.TrimHorizon, nil
	case leases.RewindLatest:
		return kltype.Latest, nil
	}
	if s != "" && len(s) <= 128 && strings.Trim(s, "0123456789") == "" {
		return kltype.AtSequenceNumber(s), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return kltype.StartPosition{}, badArg("argument --to %q: want TRIM_HORIZON, LATEST, an RFC 3339 time (e.g. 2024-05-01T10:00:00Z) or a sequence number", s)
	}
	if t.After(now) {
		return kltype.StartPosition{}, badArg("argument --to %s: the time is in the future (it is %s): no record has arrived after it yet; to skip every record until new ones arrive, use --to LATEST",
			s, now.UTC().Format(time.RFC3339))
	}
	return kltype.AtTimestamp(t), nil
}

func (c *cli) rewind(args []string) int {
	cmd := commandNamed("rewind")
	g := globals{namespaced: true}
	fs := flag.NewFlagSet("rewind", flag.ContinueOnError)
	g.register(fs)
	to := fs.String("to", "", "")
	shardID := fs.String("shard", "", "")
	dry := fs.Bool("dry-run", false, "")
	if done, code := c.parse(cmd, fs, args); done {
		return code
	}
	var missing []string
	for _, a := range []struct{ name, v string }{{"--table", g.table}, {"--stream", g.stream}, {"--to", *to}} {
		if a.v == "" {
			missing = append(missing, a.name)
		}
	}
	if len(missing) > 0 {
		return c.usageError(cmd, "the following arguments are required: "+strings.Join(missing, ", "))
	}
	if err := g.check(); err != nil {
		return c.usageError(cmd, err.Error())
	}
	tg, err := parseTarget(*to, c.now())
	if err != nil {
		return c.fail("rewind", err)
	}
	if *shardID != "" {
		if _, err := leases.NewKey(g.stream, *shardID); err != nil {
			return c.fail("rewind", badArg("argument --shard %q: not a shard id", *shardID))
		}
	}
	if tg.Type == kltype.PositionAtSequenceNumber && *shardID == "" {
		return c.fail("rewind", badArg("argument --to %s: a sequence number belongs to one shard: name it with --shard", tg.Sequence))
	}
	s, err := c.connect(&g)
	if err != nil {
		return c.fail("rewind", err)
	}
	defer s.close()

	// Find every shard's new position before writing anything: a bad
	// argument or a failed read leaves every row as it was.
	shards, err := s.listShards(c.ctx)
	if err != nil {
		return c.fail("rewind", err)
	}
	if *shardID != "" {
		shards, err = rewind.Pick(s.stream, shards, *shardID)
		if err != nil {
			return c.fail("rewind", err)
		}
	}
	plans, err := rewind.Resolve(c.ctx, s.kin, s.stream, shards, tg)
	if err != nil {
		var pe *kltype.PositionError
		if errors.As(err, &pe) {
			what := fmt.Sprintf("shard %s of stream %q", pe.ShardID, pe.Stream)
			if pe.Position.Type == kltype.PositionAtSequenceNumber {
				what = "not a sequence number of " + what
			}
			err = badArg("argument --to %s: %s: %s", *to, what, apiMessage(pe.Err))
		}
		return c.fail("rewind", err)
	}

	code := exitOK
	for _, p := range plans {
		res, err := rewind.Apply(c.ctx, s.store, s.key, p, *dry)
		if err != nil {
			var e error = s.rowErr(p.Shard, err)
			if errors.Is(err, leases.ErrMisconfigured) {
				e = fmt.Errorf("%s, shard %s: %w", s.streamRows(), p.Shard, err) // the store's message names the table
			}
			if code == exitOK {
				code = c.fail("rewind", e)
			} else {
				c.fail("rewind", e)
			}
			if errors.Is(err, leases.ErrMisconfigured) || c.ctx.Err() != nil {
				break // the same for every row
			}
			continue
		}
		fmt.Fprintf(c.stdout, "%s: %s%s\n", p.Shard, rewindMessage(res, *dry), p.Note)
	}
	return code
}

// rewindMessage says what a rewind did to a row (or, dry, would do).
func rewindMessage(r kltype.RewindResult, dry bool) string {
	from, to := showCheckpoint(r.From), showCheckpoint(r.To)
	replacing := ""
	if !r.Replaced.IsZero() {
		replacing = fmt.Sprintf(" (replacing the pending rewind to %s)", showCheckpoint(r.Replaced))
	}
	switch {
	case dry && r.Created:
		return fmt.Sprintf("would create its row and rewrite it: - -> %s", to)
	case r.Unchanged:
		return fmt.Sprintf("unchanged: %s; the shard is closed and holds no record at or after %s", from, to)
	case dry && r.Holder != "":
		return fmt.Sprintf("would request from %s: %s -> %s%s", r.Holder, from, to, replacing)
	case dry:
		return fmt.Sprintf("would rewrite (free): %s -> %s%s", from, to, replacing)
	case r.Holder == "":
		created := ""
		if r.Created {
			created = "row created, "
		}
		return fmt.Sprintf("%srewritten (free): %s -> %s%s", created, from, to, replacing)
	}
	when := "it applies the rewind within a heartbeat"
	if r.NotifyErr != nil {
		when = fmt.Sprintf("it applies the rewind at its next checkpoint or reconciliation (telling it failed: %v)", r.NotifyErr)
	}
	return fmt.Sprintf("requested from %s: %s -> %s%s; %s", r.Holder, from, to, replacing, when)
}

// apiMessage returns an AWS error's own message.
func apiMessage(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	}
	return err.Error()
}
