package membershiptest

// The Membership subtests of calls that must fail without writing: invalid
// rows, entries, owners, incarnations and keys, and calls with a dead
// context.

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

func testMemberInvalidArguments(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := kit.NewOwner(t, "a")
	e := leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 1}
	header := mustHeader(t, m)
	for _, row := range []int{-1, driver.MaxMemberRows, driver.MaxMemberRows + 1, 1 << 20} {
		_, err := m.Join(kit.Ctx(t), row, e)
		kit.WantInvalid(t, fmt.Sprintf("Join in row %d", row), err)
		_, err = m.Heartbeat(kit.Ctx(t), row, e)
		kit.WantInvalid(t, fmt.Sprintf("Heartbeat in row %d", row), err)
		_, err = m.Members(kit.Ctx(t), row)
		kit.WantInvalid(t, fmt.Sprintf("Members(%d)", row), err)
		_, err = m.ReplaceMember(kit.Ctx(t), row, e, leases.Member{})
		kit.WantInvalid(t, fmt.Sprintf("ReplaceMember in row %d", row), err)
		kit.WantInvalid(t, fmt.Sprintf("BumpRow(%d)", row), m.BumpRow(kit.Ctx(t), row))
	}
	wantHeader(t, "after calls with invalid rows", m, header)

	badEntries := map[string]leases.Member{
		"an empty owner":                {Incarnation: "inc", Heartbeat: 1},
		"an owner longer than 256":      {Owner: a + strings.Repeat("x", 257), Incarnation: "inc", Heartbeat: 1},
		"an empty incarnation":          {Owner: a, Heartbeat: 1},
		"an incarnation longer than 64": {Owner: a, Incarnation: strings.Repeat("i", 65), Heartbeat: 1},
	}
	for what, bad := range badEntries {
		_, err := m.Join(kit.Ctx(t), r, bad)
		kit.WantInvalid(t, "Join of an entry with "+what, err)
		_, err = m.Heartbeat(kit.Ctx(t), r, bad)
		kit.WantInvalid(t, "Heartbeat of an entry with "+what, err)
	}
	wantStoredExactly(t, "after invalid joins and heartbeats", m, r, nil)

	mustJoin(t, m, r, e)
	for what, c := range map[string]struct{ seen, next leases.Member }{
		"a seen entry without incarnation":  {leases.Member{Owner: a, Heartbeat: 1}, leases.Member{}},
		"a seen entry without owner":        {leases.Member{Incarnation: "inc", Heartbeat: 1}, leases.Member{}},
		"a next entry of another owner":     {e, leases.Member{Owner: a + "-other", Incarnation: "inc-2", Heartbeat: 1}},
		"a next entry without incarnation":  {e, leases.Member{Owner: a, Heartbeat: 1}},
		"a next incarnation longer than 64": {e, leases.Member{Owner: a, Incarnation: strings.Repeat("i", 65), Heartbeat: 1}},
	} {
		_, err := m.ReplaceMember(kit.Ctx(t), r, c.seen, c.next)
		kit.WantInvalid(t, "ReplaceMember with "+what, err)
	}
	wantStoredExactly(t, "after invalid replacements", m, r, []leases.Member{e})

	k := kit.NewKey(t)
	l := kit.MustCreate(t, s, k)
	missing := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	for what, c := range map[string][2]string{
		"an empty owner":                {"", "inc"},
		"an owner longer than 256":      {strings.Repeat("o", 257), "inc"},
		"an empty incarnation":          {"a", ""},
		"an incarnation longer than 64": {"a", strings.Repeat("i", 65)},
	} {
		_, err := m.TakeAs(kit.Ctx(t), l, c[0], c[1])
		kit.WantInvalid(t, "TakeAs with "+what, err)
		_, err = m.CreateAs(kit.Ctx(t), missing, c[0], c[1], leases.Checkpoint{Sequence: "1"}, "")
		kit.WantInvalid(t, "CreateAs with "+what, err)
	}
	_, err := m.TakeAs(kit.Ctx(t), leases.Lease{Key: leases.Key{Stream: k.Stream}, Counter: 1}, "a", "inc")
	kit.WantInvalid(t, "TakeAs with an empty shard id", err)
	for what, bad := range map[string]leases.Key{
		"an empty shard id":          {Stream: k.Stream},
		"an empty stream":            {Shard: "shardId-000000000001"},
		"a shard id with a colon":    {Stream: k.Stream, Shard: "shard:1"},
		"a control character":        {Stream: k.Stream + "\x00", Shard: "shardId-000000000001"},
		"a shard id longer than 128": {Stream: k.Stream, Shard: strings.Repeat("s", 129)},
		"a stream longer than 2048":  {Stream: strings.Repeat("s", 2049), Shard: "shardId-000000000001"},
	} {
		_, err := m.CreateAs(kit.Ctx(t), bad, "a", "inc", leases.Checkpoint{Sequence: "1"}, "")
		kit.WantInvalid(t, "CreateAs with "+what, err)
	}
	kit.WantRow(t, s, k, l, "invalid TakeAs calls changed the row")
	if _, err := s.Get(kit.Ctx(t), missing); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("invalid CreateAs calls created %s: Get = %v", missing, err)
	}
}

func testMemberCancelledContext(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
	e := leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 1}
	mustJoin(t, m, r, e)
	k := kit.NewKey(t)
	l := kit.MustCreate(t, s, k)
	missing := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	header := mustHeader(t, m)
	for name, c := range kit.DeadContexts(t) {
		calls := map[string]func() error{
			"Join": func() error {
				_, err := m.Join(c, r, leases.Member{Owner: b, Incarnation: "inc", Heartbeat: 1})
				return err
			},
			"Heartbeat": func() error {
				_, err := m.Heartbeat(c, r, leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 2})
				return err
			},
			"Members": func() error { _, err := m.Members(c, r); return err },
			"ReplaceMember": func() error {
				_, err := m.ReplaceMember(c, r, e, leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1})
				return err
			},
			"ReplaceMember removing": func() error { _, err := m.ReplaceMember(c, r, e, leases.Member{}); return err },
			"Header":                 func() error { _, err := m.Header(c); return err },
			"BumpRow":                func() error { return m.BumpRow(c, r) },
			"ReportVanished":         func() error { return m.ReportVanished(c) },
			"TakeAs":                 func() error { _, err := m.TakeAs(c, l, "a", "inc"); return err },
			"CreateAs": func() error {
				_, err := m.CreateAs(c, missing, "a", "inc", leases.Checkpoint{Sequence: "1"}, "")
				return err
			},
		}
		kit.WantDeadCalls(t, name, c, calls)
	}
	wantStoredExactly(t, "after calls with a dead context", m, r, []leases.Member{e})
	wantHeader(t, "after calls with a dead context", m, header)
	kit.WantRow(t, s, k, l, "TakeAs with a dead context changed the row")
	if _, err := s.Get(kit.Ctx(t), missing); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("CreateAs with a dead context created %s: Get = %v", missing, err)
	}
}
