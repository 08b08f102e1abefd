package migrate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/leases"
)

// Import copies the checkpoints of stream to.Stream from the foreign table
// into our lease rows (those of to.LeaseNamespace, if given), as the package
// documentation describes: it lists the stream's shards, reads our rows and
// the foreign table twice, an interval apart (WithInterval), translates every
// checkpoint, refuses (ErrRefused, wrapping each reason) while the source
// runs, when a checkpoint would move backwards or a live member holds a row,
// and otherwise writes every row through to.Store.
//
// The Report lists every shard, whatever the outcome: with WithDryRun, or
// with a refusal, nothing is written and the Report says what would have
// been. An error during the writes leaves the rows before it written (each
// write is whole); running Import again finishes the job, the rows already
// written being unchanged.
func Import(ctx context.Context, from Foreign, to Ours, opts ...Option) (*Report, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkOurs(to); err != nil {
		return nil, err
	}
	if from.Client == nil || from.Table == "" {
		return nil, fmt.Errorf("%w: Import needs the foreign table's Client and name", ErrInvalid)
	}
	if from.StreamID != "" && !streamIDPattern.MatchString(from.StreamID) {
		return nil, fmt.Errorf("%w: stream identifier %q: want account:stream:creationEpoch", ErrInvalid, from.StreamID)
	}
	name, key := kinesisx.Name(to.Stream), to.leaseStream()
	shards, byID, err := listShards(ctx, to.Kinesis, to.Stream)
	if err != nil {
		return nil, err
	}

	// Two reads an interval apart (ours, then the foreign table): the
	// second is the one acted on.
	read := func() (map[string]ourRow, snapshot, error) {
		rows, err := readOurs(ctx, to.Store, key, shards)
		if err != nil {
			return nil, nil, err
		}
		snap, err := scan(ctx, from.Client, from.Table)
		return rows, snap, err
	}
	ours1, first, err := read()
	if err != nil {
		return nil, err
	}
	if err := backoff.Sleep(ctx, o.interval); err != nil {
		return nil, err
	}
	ours2, second, err := read()
	if err != nil {
		return nil, err
	}

	format := from.Format
	if format == "" {
		if format, err = detect(from.Table, second); err != nil {
			return nil, err
		}
	}
	if format != KCL && format != VMware {
		return nil, fmt.Errorf("%w: format %q: want %q or %q", ErrInvalid, format, KCL, VMware)
	}
	src, err := selectRows(from, format, second, to.Stream)
	if err != nil {
		return nil, err
	}
	listed := 0
	for id := range src {
		if byID[id] != nil {
			listed++
		}
	}
	if listed == 0 {
		return nil, fmt.Errorf("%w: none of the %d items of table %q names a shard that stream %q lists", ErrSchema, len(src), from.Table, to.Stream)
	}

	rep := &Report{Stream: name, Source: from.Table, DryRun: o.dryRun}
	var refusals, hard []error
	if moved := changed(first, second); len(moved) > 0 {
		refusals = append(refusals, &RunningError{Table: from.Table, Stream: name, Changed: moved, Interval: o.interval})
	}
	// The user records of the records the KCL checkpoints name, read a
	// few shards at a time.
	var lookups []*shardInfo
	for _, si := range shards {
		if fr := src[si.id]; format == KCL && fr != nil && isDigits(fr.seq) && fr.sub >= 0 {
			lookups = append(lookups, si)
		}
	}
	records, err := countUserRecords(ctx, to, lookups, func(si *shardInfo) string { return src[si.id].seq })
	if err != nil {
		return nil, err
	}
	plans := make([]importPlan, 0, len(shards))
	for _, si := range shards {
		p, err := planImport(o, format, to, key, si, byID, src, records[si.id], ours1[si.id], ours2[si.id])
		if err != nil {
			return nil, err
		}
		switch err := p.row.Err; {
		case errors.Is(err, ErrNeedTimestamp):
			hard = append(hard, fmt.Errorf("shard %s: %w", si.id, err))
		case err != nil:
			refusals = append(refusals, fmt.Errorf("shard %s: %w", si.id, err))
		}
		plans = append(plans, p)
	}
	for id, fr := range src {
		if byID[id] == nil {
			plans = append(plans, importPlan{row: Row{Shard: id, Key: leases.Key{Stream: key, Shard: id}.String(), From: fr.show(), Before: "-", Action: Skip,
				Note: "not a shard the stream lists now (its records aged out): no row needed"}})
		}
	}
	sortPlans(plans)
	for _, p := range plans {
		rep.Rows = append(rep.Rows, p.row)
	}
	if err := refused(o, rep, "import into", to, hard, refusals); err != nil {
		return rep, err
	}
	if o.dryRun {
		return rep, nil
	}
	for i := range plans {
		p := &plans[i]
		if p.row.Action != Write && p.row.Action != Create && p.row.Action != Request {
			continue
		}
		if err := applyImport(ctx, o, to.Store, p); err != nil {
			rep.Rows[i] = p.row
			return rep, fmt.Errorf("%s, shard %s: %w", to.rows(), p.row.Shard, err)
		}
		rep.Rows[i] = p.row
	}
	return rep, nil
}

// importPlan is what to do with one shard's row.
type importPlan struct {
	row    Row
	key    leases.Key
	target leases.Checkpoint // zero: create the row without one
	seen   ourRow            // our row at the second read
}

func sortPlans(ps []importPlan) {
	slices.SortFunc(ps, func(a, b importPlan) int { return strings.Compare(a.row.Shard, b.row.Shard) })
}

func checkOurs(to Ours) error {
	if to.Store == nil || to.Kinesis == nil || to.Stream == "" {
		return fmt.Errorf("%w: Ours needs a Store, a Kinesis client and a Stream", ErrInvalid)
	}
	if to.LeaseNamespace != "" {
		if err := kinesisx.CheckNamespace(to.LeaseNamespace); err != nil {
			return fmt.Errorf("%w: Ours.LeaseNamespace: %w", ErrInvalid, err)
		}
	}
	if _, err := leases.NewKey(to.leaseStream(), "shardId-000000000000"); err != nil {
		return fmt.Errorf("%w: stream %q: %w", ErrInvalid, to.Stream, err)
	}
	return nil
}

// planImport decides the row of shard si (keyed stream, our rows' stream
// part): what the foreign row translates to, and what to do with ours (seen
// as a, then b).
func planImport(o options, format Format, to Ours, stream string, si *shardInfo, byID map[string]*shardInfo,
	src map[string]*foreignRow, records int, a, b ourRow) (importPlan, error) {
	key := leases.Key{Stream: stream, Shard: si.id}
	p := importPlan{key: key, seen: b, row: Row{Shard: si.id, Parents: si.parents, Key: key.String(), From: "-", Before: showOurs(b.lease.Checkpoint)}}
	if !b.found {
		p.row.Before = "-"
	}
	fr := src[si.id]
	var target leases.Checkpoint
	switch {
	case fr != nil:
		p.row.From = fr.show()
		var err error
		if format == VMware {
			target, err = FromVMware(fr.seq)
		} else {
			records = max(records, 1)
			target, err = FromKCL(fr.seq, fr.sub, records, o.at)
			if records > 1 {
				p.row.Note = fmt.Sprintf("a KPL aggregate of %d user records", records)
			}
		}
		switch {
		case errors.Is(err, ErrNeedTimestamp):
			p.row.Action, p.row.To = Refused, "AT_TIMESTAMP:?"
			p.row.Err = fmt.Errorf("%w: item %s is at AT_TIMESTAMP, whose time the KCL keeps in the application's configuration: give it (--at-timestamp, WithAtTimestamp)", ErrNeedTimestamp, fr.key)
			return p, nil
		case err != nil:
			return p, fmt.Errorf("item %s: %w", fr.key, err)
		}
	case format == KCL && si.closed && hasDescendantIn(byID, si.id, src):
		target = leases.Checkpoint{Sequence: leases.ShardEnd}
		p.row.Note = "no item: the KCL deletes the lease of a finished parent (and does not wait for one without a lease); its child has one"
	}
	p.target = target
	p.row.Checkpoint = target
	p.row.To = showOurs(target)
	switch {
	case target.IsZero() && b.found:
		p.row.Action, p.row.Checkpoint = Unchanged, b.lease.Checkpoint
		p.row.Note = joinNote(p.row.Note, "the source has no checkpoint")
		return p, nil
	case target.IsZero():
		p.row.Action = Create
		p.row.Note = joinNote(p.row.Note, "the source has no checkpoint: a free row without one (the subscription's start position, or a child's beginning)")
		return p, nil
	case b.found && b.lease.Checkpoint == target && b.lease.RewindTo.IsZero():
		p.row.Action = Unchanged
		return p, nil
	}
	var refuse error
	if b.found && oursProgress(target).cmp(oursProgress(b.lease.Checkpoint)) < 0 {
		refuse = &BackwardsError{Key: key.String(), From: showOurs(b.lease.Checkpoint), To: showOurs(target)}
	}
	p.row.Action = Write
	if b.found && b.lease.Held() {
		p.row.Action = Request
		if liveHolder(to.Store, a, b) {
			refuse = errors.Join(refuse, &HeldError{Key: key.String(), Owner: b.lease.Owner, Incarnation: b.lease.Incarnation})
			p.row.Note = joinNote(p.row.Note, fmt.Sprintf("held by %s, alive: a rewind request it applies within a heartbeat", b.lease.Owner))
		} else {
			p.row.Note = joinNote(p.row.Note, fmt.Sprintf("held by %s, which did not heartbeat in %v: a rewind request its next holder applies", b.lease.Owner, o.interval))
		}
	}
	if refuse != nil {
		p.row.Err = refuse
		if !o.force {
			p.row.Action = Refused
		}
	}
	return p, nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// applyImport writes one planned row: it creates the row if missing, then
// rewinds it (at once when free, by a request to its holder when held). On a
// conflict it reads the row again and checks it again.
func applyImport(ctx context.Context, o options, st leases.Store, p *importPlan) error {
	l, found := p.seen.lease, p.seen.found
	var lastErr error
	for attempt := 1; attempt <= writeAttempts; attempt++ {
		if attempt > 1 {
			if err := backoff.Sleep(ctx, time.Duration(attempt-1)*50*time.Millisecond+rand.N(50*time.Millisecond)); err != nil {
				return err
			}
			var err error
			l, err = st.Get(ctx, p.key)
			switch {
			case errors.Is(err, leases.ErrNotFound):
				found = false
			case err != nil:
				return err
			default:
				found = true
				if err := recheck(o, p, l); err != nil {
					return err
				}
			}
		}
		if !found {
			var err error
			l, err = st.Create(ctx, p.key)
			if errors.Is(err, leases.ErrConflict) {
				lastErr = err
				continue // created meanwhile: read it
			}
			if err != nil {
				return err
			}
			found = true
			if p.target.IsZero() {
				p.row.Action = Create
				return nil
			}
			if err := recheck(o, p, l); err != nil { // a legacy row's checkpoint may have been copied
				return err
			}
		}
		if p.target.IsZero() || (l.Checkpoint == p.target && l.RewindTo.IsZero()) {
			p.row.Action = Unchanged
			return nil
		}
		nl, err := st.Rewind(ctx, l, p.target)
		if errors.Is(err, leases.ErrConflict) {
			lastErr = err
			continue
		}
		if err != nil {
			return err
		}
		if !nl.Held() {
			p.row.Action = Write
			return nil
		}
		p.row.Action = Request
		if err := notify(ctx, st, nl.Owner, nl.Incarnation); err != nil {
			p.row.Note = joinNote(p.row.Note, fmt.Sprintf("telling %s failed (%v): it applies the request at its next checkpoint or reconciliation", nl.Owner, err))
		}
		return nil
	}
	return fmt.Errorf("the row kept changing (%d attempts); run the import again: %w", writeAttempts, lastErr)
}

// recheck checks row l, read again after a conflict, against the plan:
// not moving it backwards, and not held by someone who did not hold it at
// the plan's read (who took it meanwhile, so is alive).
func recheck(o options, p *importPlan, l leases.Lease) error {
	if o.force {
		return nil
	}
	if oursProgress(p.target).cmp(oursProgress(l.Checkpoint)) < 0 {
		return fmt.Errorf("%w: %w", ErrRefused, &BackwardsError{Key: p.key.String(), From: showOurs(l.Checkpoint), To: showOurs(p.target)})
	}
	if l.Held() && (!p.seen.found || l.Owner != p.seen.lease.Owner || l.Incarnation != p.seen.lease.Incarnation) {
		return fmt.Errorf("%w: %w", ErrRefused, &HeldError{Key: p.key.String(), Owner: l.Owner, Incarnation: l.Incarnation})
	}
	return nil
}
