package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/kinesislease/kinesislease/internal/rewind"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// ourRow is one read of our row of a shard, with its holder's heartbeat.
type ourRow struct {
	lease leases.Lease
	found bool
	// hb is the holder's heartbeat; hbOK says its entry was found, of the
	// row's incarnation and not leaving.
	hb   int64
	hbOK bool
}

// readOurs reads our rows of the shards (a few at a time), keyed stream (the
// stream part of our rows' keys: Ours.leaseStream), and the membership
// entries of their holders.
func readOurs(ctx context.Context, st leases.Store, stream string, shards []*shardInfo) (map[string]ourRow, error) {
	rows := make([]ourRow, len(shards))
	errs := make([]error, len(shards))
	bounded(len(shards), func(i int) {
		key := leases.Key{Stream: stream, Shard: shards[i].id}
		l, err := st.Get(ctx, key)
		switch {
		case errors.Is(err, leases.ErrNotFound):
		case err != nil:
			errs[i] = fmt.Errorf("row %s: %w", key, err)
		default:
			rows[i] = ourRow{lease: l, found: true}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make(map[string]ourRow, len(shards))
	mem, _ := st.(leases.Membership)
	entries := map[int][]leases.Member{}
	for i, si := range shards {
		r := rows[i]
		if mem != nil && r.lease.Held() && r.lease.Incarnation != "" {
			if row, ok := driver.IncarnationRow(r.lease.Incarnation); ok {
				ms, seen := entries[row]
				if !seen {
					var err error
					if ms, err = mem.Members(ctx, row); err != nil {
						return nil, fmt.Errorf("membership row %d: %w", row, err)
					}
					entries[row] = ms
				}
				if j := slices.IndexFunc(ms, func(m leases.Member) bool {
					return m.Owner == r.lease.Owner && m.Incarnation == r.lease.Incarnation
				}); j >= 0 && !ms[j].Leaving {
					r.hb, r.hbOK = ms[j].Heartbeat, true
				}
			}
		}
		out[si.id] = r
	}
	return out, nil
}

// liveHolder reports whether the holder of our row, read as a then b, is
// alive: the row is held, and it changed between the reads or its holder
// heartbeated. Without membership (st implements no leases.Membership) a
// held row counts as live.
func liveHolder(st leases.Store, a, b ourRow) bool {
	if !b.found || !b.lease.Held() {
		return false
	}
	if _, ok := st.(leases.Membership); !ok {
		return true
	}
	if !a.found || a.lease.Counter != b.lease.Counter {
		return true
	}
	return a.hbOK && b.hbOK && a.hb != b.hb
}

// fleet reads every membership entry: "owner/incarnation" -> heartbeat, for
// entries not leaving. A store without leases.Membership has none.
func fleet(ctx context.Context, st leases.Store) (map[string]int64, error) {
	mem, ok := st.(leases.Membership)
	if !ok {
		return nil, nil
	}
	h, err := mem.Header(ctx)
	if err != nil {
		return nil, fmt.Errorf("membership header: %w", err)
	}
	out := map[string]int64{}
	rows := make([]int, 0, len(h.Rows))
	for row := range h.Rows {
		rows = append(rows, row)
	}
	sort.Ints(rows)
	for _, row := range rows {
		ms, err := mem.Members(ctx, row)
		if err != nil {
			return nil, fmt.Errorf("membership row %d: %w", row, err)
		}
		for _, m := range ms {
			if !m.Leaving {
				out[m.Owner+"/"+m.Incarnation] = m.Heartbeat
			}
		}
	}
	return out, nil
}

// notify bumps the Notice of the holder's membership entry, so that it
// looks at its rows (and applies a rewind request) at its next heartbeat.
// An entry gone or of another incarnation needs none: the next holder applies
// the request before reading.
func notify(ctx context.Context, st leases.Store, owner, inc string) error {
	mem, ok := st.(leases.Membership)
	if !ok {
		return nil
	}
	return rewind.Notify(ctx, mem, owner, inc)
}

// writeAttempts bounds the conditional writes tried on one row.
const writeAttempts = 5
