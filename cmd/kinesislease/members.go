package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/leases"
)

const membersSynopsis = "members --table <value> [--interval <value>] [--stream <value> ...] [--json] [global options]"

// Heartbeat changes between the two reads of members --interval.
const (
	beatAdvanced  = "advanced"  // the same incarnation heartbeated
	beatUnchanged = "unchanged" // it did not
	beatJoined    = "joined"    // the entry is new in the second read
	beatGone      = "gone"      // the entry is gone from the second read
)

// memberStatus is one line of `members`, and one object of `members --json`
// (the JSON field names are stable).
type memberStatus struct {
	Row         int    `json:"row"`
	Owner       string `json:"owner"`
	Incarnation string `json:"incarnation"`
	// Heartbeat is the entry's heartbeat, an opaque counter (not a time).
	Heartbeat int64 `json:"heartbeat"`
	// HeartbeatChange compares the two reads of --interval: advanced,
	// unchanged, joined, gone; null without --interval.
	HeartbeatChange *string `json:"heartbeat_change"`
	Leaving         bool    `json:"leaving"`
	Held            int64   `json:"held"`
	Ended           int64   `json:"ended"`
	Young           bool    `json:"young"`
	// Capacity is the instance's weight in the plan (WithCapacity); null
	// for an entry that publishes none (a version before balancing by
	// load), counted as 1.
	Capacity *float64 `json:"capacity"`
	// MaxLeases is its own cap (WithMaxLeases); 0 for none.
	MaxLeases int64 `json:"max_leases"`
	// Load is its load as its last heartbeat published it: the bytes per
	// second of the shards it holds, to two significant digits.
	Load int64 `json:"load_bytes_per_s"`
	// Utilization is its utilization of its capacity as its last
	// heartbeat published it (WithUtilization; a fraction, 1 when fully
	// used); null for an entry that publishes none.
	Utilization *float64 `json:"utilization"`
	// Cost is its cost factor in its fleet's plan by load: its cost per
	// byte (utilization × capacity over load) over the fleet's, at least 1
	// and at most 3, in steps of 0.05; 1 when it or its fleet publishes no
	// utilization, or an instance of the fleet no capacity.
	Cost *float64 `json:"cost"`
	// Share is its fraction of its fleet's load, FairShare its capacity
	// divided by its Cost as a fraction of the same over its fleet (1/n
	// when an instance of the fleet publishes no capacity: the fleet then
	// plans by count). Its fleet: the entries not leaving (nor gone) that
	// read the same streams. Cost, Share and FairShare are null for an
	// entry leaving or gone; Share null while the fleet carries no load.
	Share     *float64 `json:"share"`
	FairShare *float64 `json:"fair_share"`
	// Hot are its hot shards (at most a few, well above the mean of what
	// it holds) with their loads, hottest first.
	Hot []hotShard `json:"hot"`

	streams string // the entry's streams digest: the members it plans with
}

// hotShard is one hot shard of a member's entry. The entry names it by a
// short hash of its stream and shard: Stream and Shard are set when one of
// the streams named by --stream has a shard of that hash.
type hotShard struct {
	ID     string `json:"id"`
	Stream string `json:"stream,omitempty"`
	Shard  string `json:"shard,omitempty"`
	Load   int64  `json:"bytes_per_s"`
}

func (c *cli) members(args []string) int {
	cmd := commandNamed("members")
	g := globals{tableOnly: true}
	fs := flag.NewFlagSet("members", flag.ContinueOnError)
	g.register(fs)
	asJSON := fs.Bool("json", false, "")
	interval := fs.Duration("interval", 0, "")
	var streams []string
	fs.Func("stream", "", func(v string) error {
		if _, err := leases.NewKey(v, "shardId-000000000000"); err != nil {
			return fmt.Errorf("not a stream name or ARN")
		}
		streams = append(streams, v)
		return nil
	})
	if done, code := c.parse(cmd, fs, args); done {
		return code
	}
	if err := g.check(); err != nil {
		return c.usageError(cmd, err.Error())
	}
	if *interval < 0 {
		return c.usageError(cmd, fmt.Sprintf("argument --interval %v: want a duration such as 10s, or 0 for one read", *interval))
	}
	s, err := c.connect(&g)
	if err != nil {
		return c.fail("members", err)
	}
	defer s.close()
	rows, err := s.readMembers(c.ctx)
	if err != nil {
		return c.fail("members", err)
	}
	if *interval > 0 {
		if err := c.wait(*interval); err != nil {
			return c.fail("members", err)
		}
		second, err := s.readMembers(c.ctx)
		if err != nil {
			return c.fail("members", err)
		}
		rows = compareMembers(rows, second)
	}
	shareLoads(rows)
	if len(streams) > 0 {
		ids, err := s.hotIDs(c.ctx, streams)
		if err != nil {
			return c.fail("members", err)
		}
		resolveHot(rows, ids)
	}
	if *asJSON {
		if rows == nil {
			rows = []memberStatus{}
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rows)
	} else {
		err = writeMembers(c.stdout, rows, *interval > 0, len(streams) > 1)
		if err == nil && len(rows) == 0 {
			fmt.Fprintf(c.stderr, "kinesislease members: table %q has no members: no service runs on it (or none has since it was created)\n", s.table)
		}
	}
	if err != nil {
		return c.fail("members", err)
	}
	return exitOK
}

// readMembers reads the membership header and every row it lists (GetItem
// each), and returns the entries sorted by row and owner.
func (s *session) readMembers(ctx context.Context) ([]memberStatus, error) {
	h, err := s.store.Header(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the membership header: %w", err)
	}
	rows := slices.Sorted(maps.Keys(h.Rows))
	entries := make([][]leases.Member, len(rows))
	errs := make([]error, len(rows))
	sem := make(chan struct{}, statusConcurrency)
	var wg sync.WaitGroup
	for i, r := range rows {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			entries[i], errs[i] = s.store.Members(ctx, r)
		})
	}
	wg.Wait()
	var out []memberStatus
	for i, r := range rows {
		if errs[i] != nil {
			return nil, fmt.Errorf("reading membership row %d: %w", r, errs[i])
		}
		for _, m := range entries[i] {
			ms := memberStatus{
				Row: r, Owner: m.Owner, Incarnation: m.Incarnation, Heartbeat: m.Heartbeat,
				Leaving: m.Leaving, Held: m.Held, Ended: m.Ended, Young: m.Young,
				MaxLeases: m.MaxLeases, Load: m.Load, Hot: []hotShard{}, streams: m.Streams,
			}
			if m.Capacity > 0 {
				c := float64(m.Capacity) / 1000
				ms.Capacity = &c
			}
			if m.Utilization > 0 {
				u := float64(m.Utilization) / 1000
				ms.Utilization = &u
			}
			for _, h := range balance.DecodeHot(m.Hot) {
				ms.Hot = append(ms.Hot, hotShard{ID: h.ID, Load: h.Load})
			}
			out = append(out, ms)
		}
	}
	return out, nil
}

// compareMembers returns the entries of the second read, each with how its
// heartbeat changed since the first, and the entries gone since.
func compareMembers(first, second []memberStatus) []memberStatus {
	type id struct {
		row        int
		owner, inc string
	}
	before := map[id]memberStatus{}
	for _, m := range first {
		before[id{m.Row, m.Owner, m.Incarnation}] = m
	}
	change := func(s string) *string { return &s }
	var out []memberStatus
	for _, m := range second {
		k := id{m.Row, m.Owner, m.Incarnation}
		b, ok := before[k]
		switch {
		case !ok:
			m.HeartbeatChange = change(beatJoined)
		case b.Heartbeat != m.Heartbeat:
			m.HeartbeatChange = change(beatAdvanced)
		default:
			m.HeartbeatChange = change(beatUnchanged)
		}
		delete(before, k)
		out = append(out, m)
	}
	for _, m := range before {
		m.HeartbeatChange = change(beatGone)
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b memberStatus) int {
		if a.Row != b.Row {
			return a.Row - b.Row
		}
		if c := strings.Compare(a.Owner, b.Owner); c != 0 {
			return c
		}
		return strings.Compare(a.Incarnation, b.Incarnation)
	})
	return out
}

// membersHeader names the columns of the text output; CHANGE only with
// --interval.
func membersHeader(compared bool) []string {
	h := []string{"ROW", "OWNER", "INCARNATION", "HEARTBEAT", "LEAVING", "HELD", "ENDED"}
	if compared {
		h = slices.Insert(h, 4, "CHANGE")
	}
	return append(h, "CAPACITY", "MAX_LEASES", "LOAD_B/S", "UTILIZATION", "COST", "SHARE", "FAIR_SHARE", "HOT")
}

func writeMembers(w io.Writer, rows []memberStatus, compared, streamNames bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(membersHeader(compared), "\t"))
	for _, m := range rows {
		leaving := "no"
		if m.Leaving {
			leaving = "yes"
		}
		cols := []string{strconv.Itoa(m.Row), m.Owner, m.Incarnation, strconv.FormatInt(m.Heartbeat, 10)}
		if compared {
			cols = append(cols, dash(ptrString(m.HeartbeatChange)))
		}
		cols = append(cols, leaving, strconv.FormatInt(m.Held, 10), strconv.FormatInt(m.Ended, 10))
		capacity, maxLeases, load := "-", "-", "0"
		if m.Capacity != nil {
			capacity = strconv.FormatFloat(*m.Capacity, 'f', -1, 64)
		}
		if m.MaxLeases > 0 {
			maxLeases = strconv.FormatInt(m.MaxLeases, 10)
		}
		if m.Load > 0 {
			load = showRate(m.Load)
		}
		cols = append(cols, capacity, maxLeases, load, showShare(m.Utilization), showFactor(m.Cost), showShare(m.Share), showShare(m.FairShare), showHot(m.Hot, streamNames))
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
