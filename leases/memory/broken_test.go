package memory

// The conformance suite checked against stores broken on purpose: each
// variant below breaks one rule of the lease or membership contract, and the subtest of
// leasestest named for it must fail. Each variant runs the whole suite in a
// child process (a failing leasestest.Run cannot be contained in this one).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/leasestest"
)

const brokenEnv = "KINESISLEASE_LEASESTEST_BROKEN"

// A broken variant: the store, and the leasestest subtest that must catch it.
type brokenVariant struct {
	store     func() leases.Store
	mustCatch string
}

var brokenVariants = map[string]brokenVariant{
	// Holder writes check the owner but not the incarnation: an earlier
	// process of the same owner id writes a row another incarnation holds.
	"checkpoint-ignores-incarnation":  {func() leases.Store { return ignoresIncarnation{New(), "Checkpoint"} }, "HolderWritesByAnotherIncarnationConflict"},
	"release-ignores-incarnation":     {func() leases.Store { return ignoresIncarnation{New(), "Release"} }, "HolderWritesByAnotherIncarnationConflict"},
	"applyrewind-ignores-incarnation": {func() leases.Store { return ignoresIncarnation{New(), "ApplyRewind"} }, "HolderWritesByAnotherIncarnationConflict"},
	"rewind-ignores-incarnation":      {func() leases.Store { return ignoresIncarnation{New(), "Rewind"} }, "HolderWritesByAnotherIncarnationConflict"},
	// A Rewind of a held row clears the holder's incarnation.
	"rewind-clears-incarnation": {func() leases.Store { return clearingRewind{New()} }, "OthersWritesKeepTheHolder"},
	// Check fails on a working store.
	"check-fails": {func() leases.Store {
		return checkFunc{New(), func(context.Context) error { return errors.New("broken: no table") }}
	}, "Checker"},
	// Check reports a cancelled context as a misconfiguration.
	"check-cancel-misconfigured": {func() leases.Store {
		return checkFunc{New(), func(ctx context.Context) error {
			if ctx.Err() != nil {
				return fmt.Errorf("broken: table unreachable: %w", leases.ErrMisconfigured)
			}
			return nil
		}}
	}, "Checker"},
	// Heartbeat overwrites the entry of another incarnation: two processes
	// with one owner id both heartbeat.
	"heartbeat-any-incarnation": {func() leases.Store { return anyIncarnation{New()} }, "Membership/HeartbeatOfAnotherIncarnationConflicts"},
	// Heartbeat checks the incarnation only (the contract before notices
	// made it fail): a member never learns that its notice was bumped, and
	// writes the bump away.
	"heartbeat-ignores-notice": {func() leases.Store {
		return condHeartbeat{New(), func(cur, m leases.Member) bool { return cur.Incarnation == m.Incarnation }}
	}, "Membership/HeartbeatFailsOnBumpedNotice"},
	// Heartbeat checks the notice only when it carries one: a member that
	// has seen no notice yet writes the first bump away.
	"heartbeat-notice-only-if-set": {func() leases.Store {
		return condHeartbeat{New(), func(cur, m leases.Member) bool {
			return cur.Incarnation == m.Incarnation && (m.Notice == 0 || cur.Notice == m.Notice)
		}}
	}, "Membership/HeartbeatFailsOnBumpedNotice"},
	// Heartbeat drops Ended: the others never learn that a member read a
	// shard to its end.
	"heartbeat-drops-ended": {func() leases.Store { return droppingEnded{New()} }, "Membership/EndedRoundTrips"},
	// Heartbeat drops Listing: a lister's digest never reaches the others,
	// who fall back to listing every stream themselves.
	"heartbeat-drops-listing": {func() leases.Store { return droppingListing{New()} }, "Membership/ListingRoundTrips"},
	// ReplaceMember checks the incarnation only: a live entry seen stale
	// once is replaced.
	"replace-ignores-heartbeat": {func() leases.Store { return replaceIgnoresHeartbeat{New()} }, "Membership/ReplaceMemberOnlyIfSeen"},
	// Release leaves the incarnation in place.
	"release-keeps-incarnation": {func() leases.Store { return keepingRelease{New()} }, "Membership/ReleaseClearsIncarnation"},
	// Lease methods accept the key of a membership row.
	"member-key-is-lease": {func() leases.Store { return memberKeyLease{New()} }, "Membership/MembershipRowsAreNotLeases"},
	// Heartbeat creates a missing entry (the contract before Join): a
	// member removed as dead, or one whose table was recreated, heartbeats
	// on unnoticed, and rows fill past their capacity.
	"heartbeat-creates-entry": {func() leases.Store { return creatingHeartbeat{New()} }, "Membership/HeartbeatNeedsAnEntry"},
	// Join ignores driver.RowCapacity: rows grow past what one write unit
	// covers.
	"join-exceeds-capacity": {func() leases.Store {
		return brokenJoin{Store: New(), room: func(int, int) bool { return true }}
	}, "Membership/JoinCapacity"},
	// Join counts every entry ever written to the row and removals never
	// give the room back (a count that is incremented but not
	// decremented): a row emptied by removals stays full.
	"join-counts-removed-entries": {func() leases.Store {
		joins := map[int]int{}
		return brokenJoin{Store: New(),
			room:   func(row, _ int) bool { return joins[row] < driver.RowCapacity },
			joined: func(row int) { joins[row]++ }}
	}, "Membership/JoinCapacity"},
	// Join on a full row fails without saying so: the joiner cannot tell a
	// full row from a conflict on its own entry.
	"join-full-not-flagged": {func() leases.Store { return brokenJoin{Store: New(), unflagged: true} }, "Membership/JoinCapacity"},
	// Join writes over another entry of the owner: a second process with
	// the same owner id takes the first one's entry.
	"join-overwrites-entry": {func() leases.Store { return brokenJoin{Store: New(), overwrite: true} }, "Membership/JoinIsIdempotent"},
	// Join fails on the entry it wrote itself: a resent Join whose first
	// answer was lost reports a conflict.
	"join-resend-conflicts": {func() leases.Store { return brokenJoin{Store: New(), resendConflicts: true} }, "Membership/JoinIsIdempotent"},
	// BumpRow reads the version and writes it back plus one: concurrent
	// bumps are lost, and a member misses a roster change.
	"bump-lost-increment": {func() leases.Store { return readModifyWriteBump{New()} }, "Membership/ConcurrentBumpsAllCount"},
	// BumpRow keeps one version for every row: a member re-reads rows whose
	// roster did not change, and the others' versions move.
	"bump-collapses-rows": {func() leases.Store { return collapsingBump{New()} }, "Membership/HeaderBumps"},
	// Header returns the store's own map: the caller's changes reach the
	// store.
	"header-shares-map": {func() leases.Store { return sharedHeader{New()} }, "Membership/HeaderBumps"},
	// CreateAs writes over a row that exists.
	"createas-overwrites": {func() leases.Store { return brokenCreateAs{Store: New(), overwrite: true} }, "Membership/CreateAsOnlyIfAbsent"},
	// CreateAs drops the checkpoint: the recreated row starts from the
	// subscription's start position.
	"createas-drops-checkpoint": {func() leases.Store { return brokenCreateAs{Store: New(), dropCheckpoint: true} }, "Membership/CreateAs"},
	// CreateAs checks the key with Key.Validate, not ValidateLeaseKey: it
	// creates a lease row under a membership row's key.
	"createas-accepts-member-key": {func() leases.Store { return brokenCreateAs{Store: New(), anyKey: true} }, "Membership/MembershipRowsAreNotLeases"},
	// CreateAs drops the Rewind id: a row recreated from a copy read after
	// the last rewind looks as if it were read before, and is recreated at
	// the rewind again after a second deletion.
	"createas-drops-rewind": {func() leases.Store { return brokenCreateAs{Store: New(), dropRewind: true} }, "Membership/CreateAs"},
	// Rewind keeps no record of the rewind.
	"rewind-unrecorded": {func() leases.Store { return unrecordedRewind{New()} }, "Membership/RewindIsRecorded"},
	// Check ignores its context and blocks.
	"check-ignores-context": {func() leases.Store {
		return checkFunc{New(), func(ctx context.Context) error {
			if ctx.Err() != nil {
				time.Sleep(6 * time.Second) // longer than leasestest waits

			}
			return nil
		}}
	}, "Checker"},
}

type anyIncarnation struct{ *Store }

func (b anyIncarnation) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if err := beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateMember(m); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.members[row][m.Owner]; !ok {
		return nil, &leases.MemberConflictError{Op: "Heartbeat", Row: row, Owner: m.Owner}
	}
	b.members[row][m.Owner] = m
	return sortedMembers(b.members[row]), nil
}

// condHeartbeat writes m over an existing entry cur when ok(cur, m).
type condHeartbeat struct {
	*Store
	ok func(cur, m leases.Member) bool
}

func (b condHeartbeat) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if err := beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateMember(m); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.members[row][m.Owner]; !ok || !b.ok(cur, m) {
		return nil, &leases.MemberConflictError{Op: "Heartbeat", Row: row, Owner: m.Owner, Current: cur}
	}
	b.members[row][m.Owner] = m
	return sortedMembers(b.members[row]), nil
}

// creatingHeartbeat writes m when its owner has no entry, as Join would
// (room or not).
type creatingHeartbeat struct{ *Store }

func (b creatingHeartbeat) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if err := beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateMember(m); err != nil {
		return nil, err
	}
	b.mu.Lock()
	_, ok := b.members[row][m.Owner]
	if !ok {
		if b.members[row] == nil {
			b.members[row] = map[string]leases.Member{}
		}
		b.members[row][m.Owner] = m
	}
	ms := sortedMembers(b.members[row])
	b.mu.Unlock()
	if ok {
		return b.Store.Heartbeat(ctx, row, m)
	}
	return ms, nil
}

// brokenJoin is a Join with one rule broken: room (nil: fewer than
// RowCapacity entries) says whether row, holding n entries, takes another,
// and joined is told of every entry written; overwrite writes over
// another entry of the owner; resendConflicts fails on the owner's
// identical entry; unflagged leaves Full unset on a full row.
type brokenJoin struct {
	*Store
	room                                  func(row, n int) bool
	joined                                func(row int)
	overwrite, resendConflicts, unflagged bool
}

func (b brokenJoin) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if err := beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateMember(m); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	entries := b.members[row]
	if cur, ok := entries[m.Owner]; ok {
		switch {
		case cur == m && !b.resendConflicts:
			return sortedMembers(entries), nil
		case cur != m && b.overwrite:
			entries[m.Owner] = m
			return sortedMembers(entries), nil
		}
		return nil, &leases.MemberConflictError{Op: "Join", Row: row, Owner: m.Owner, Current: cur}
	}
	room := len(entries) < driver.RowCapacity
	if b.room != nil {
		room = b.room(row, len(entries))
	}
	if !room {
		return nil, &leases.MemberConflictError{Op: "Join", Row: row, Owner: m.Owner, Full: !b.unflagged}
	}
	if entries == nil {
		entries = make(map[string]leases.Member)
		b.members[row] = entries
	}
	entries[m.Owner] = m
	if b.joined != nil {
		b.joined(row)
	}
	return sortedMembers(entries), nil
}

// readModifyWriteBump reads a row's version and writes it back plus one,
// without holding the lock in between.
type readModifyWriteBump struct{ *Store }

func (b readModifyWriteBump) BumpRow(ctx context.Context, row int) error {
	if err := beginMember(ctx, row); err != nil {
		return err
	}
	b.mu.Lock()
	v := b.header[row]
	b.mu.Unlock()
	time.Sleep(time.Millisecond) // the round trip between the read and the write
	b.mu.Lock()
	b.header[row] = v + 1
	b.mu.Unlock()
	return nil
}

// collapsingBump bumps one version, row 0's, whatever the row.
type collapsingBump struct{ *Store }

func (b collapsingBump) BumpRow(ctx context.Context, row int) error {
	if err := beginMember(ctx, row); err != nil {
		return err
	}
	return b.Store.BumpRow(ctx, 0)
}

// sharedHeader returns the store's own map of versions.
type sharedHeader struct{ *Store }

func (b sharedHeader) Header(ctx context.Context) (leases.MemberHeader, error) {
	if err := ctx.Err(); err != nil {
		return leases.MemberHeader{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return leases.MemberHeader{Rows: b.header, Vanished: b.vanished}, nil
}

// brokenCreateAs is a CreateAs with one rule broken: overwrite writes over
// a row that exists, dropCheckpoint ignores cp, anyKey validates the key
// with Key.Validate alone.
type brokenCreateAs struct {
	*Store
	overwrite, dropCheckpoint, anyKey, dropRewind bool
}

func (b brokenCreateAs) CreateAs(ctx context.Context, key leases.Key, owner, incarnation string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	if err := ctx.Err(); err != nil {
		return leases.Lease{}, err
	}
	validate := leases.ValidateLeaseKey
	if b.anyKey {
		validate = func(k leases.Key) error { return k.Validate() }
	}
	if err := validate(key); err != nil {
		return leases.Lease{}, err
	}
	if err := leases.ValidateMember(leases.Member{Owner: owner, Incarnation: incarnation}); err != nil {
		return leases.Lease{}, err
	}
	if b.dropCheckpoint {
		cp = leases.Checkpoint{}
	}
	if b.dropRewind {
		rewind = ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.rows[key]; ok && !b.overwrite {
		return leases.Lease{}, &leases.ConflictError{Op: "CreateAs", Key: key}
	}
	l := leases.Lease{Key: key, Owner: owner, Incarnation: incarnation, Checkpoint: cp, Rewind: rewind, Counter: 1, Token: token()}
	b.rows[key] = l
	return l, nil
}

// unrecordedRewind rewinds the row but keeps no record of it: a row deleted
// after the rewind comes back from a copy read before it.
type unrecordedRewind struct{ *Store }

func (b unrecordedRewind) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	if err := begin(ctx, key); err != nil {
		return leases.RewindRecord{}, err
	}
	return leases.RewindRecord{}, nil
}

type droppingEnded struct{ *Store }

func (b droppingEnded) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	m.Ended = 0
	return b.Store.Heartbeat(ctx, row, m)
}

type droppingListing struct{ *Store }

func (b droppingListing) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	m.Listing = ""
	return b.Store.Heartbeat(ctx, row, m)
}

type replaceIgnoresHeartbeat struct{ *Store }

func (b replaceIgnoresHeartbeat) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	b.mu.Lock()
	if cur, ok := b.members[row][seen.Owner]; ok && cur.Incarnation == seen.Incarnation {
		seen.Heartbeat = cur.Heartbeat
	}
	b.mu.Unlock()
	return b.Store.ReplaceMember(ctx, row, seen, next)
}

// ignoresIncarnation makes the holder write op conditional on the owner
// alone: it writes as if the caller named the row's incarnation.
type ignoresIncarnation struct {
	*Store
	op string
}

func (b ignoresIncarnation) asStored(op string, l leases.Lease) leases.Lease {
	if op != b.op {
		return l
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.rows[l.Key]; ok && r.Owner == l.Owner {
		l.Incarnation = r.Incarnation
	}
	return l
}

func (b ignoresIncarnation) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return b.Store.Checkpoint(ctx, b.asStored("Checkpoint", l), cp)
}

func (b ignoresIncarnation) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return b.Store.Release(ctx, b.asStored("Release", l), cp)
}

func (b ignoresIncarnation) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	return b.Store.ApplyRewind(ctx, b.asStored("ApplyRewind", l))
}

func (b ignoresIncarnation) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return b.Store.Rewind(ctx, b.asStored("Rewind", l), cp)
}

type clearingRewind struct{ *Store }

func (b clearingRewind) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if l.Owner == "" || cp.Sequence == "" {
		return b.Store.Rewind(ctx, l, cp)
	}
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("Rewind", l, true, func(r *leases.Lease) error {
		r.RewindTo = cp
		r.Incarnation = ""
		return nil
	})
}

type keepingRelease struct{ *Store }

func (b keepingRelease) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("Release", l, true, func(r *leases.Lease) error {
		r.Owner = ""
		if !cp.IsZero() {
			r.Checkpoint = cp
		}
		return nil
	})
}

type memberKeyLease struct{ *Store }

func (b memberKeyLease) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	if err := key.Validate(); err != nil || !driver.IsMemberKey(key.String()) {
		return b.Store.Create(ctx, key)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	l := leases.Lease{Key: key, Counter: 1, Token: token()}
	b.rows[key] = l
	return l, nil
}

type checkFunc struct {
	*Store
	check func(context.Context) error
}

func (c checkFunc) Check(ctx context.Context) error { return c.check(ctx) }

// TestBrokenStoreChild runs the suite on the variant named by brokenEnv; it
// is the child of TestSuiteCatchesBrokenStores and skips otherwise.
func TestBrokenStoreChild(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	v, ok := brokenVariants[name]
	if !ok {
		t.Fatalf("unknown variant %q", name)
	}
	leasestest.Run(t, func(*testing.T) leases.Store { return v.store() })
}

var failedSubtest = regexp.MustCompile(`(?m)^\s*--- FAIL: TestBrokenStoreChild/(\S+)`)

func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("in a child")
	}
	if testing.Short() {
		t.Skip("starts a process per variant")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range brokenVariants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(exe, "-test.run=^TestBrokenStoreChild$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed on a store broken by %s (error %v), want subtest %s to fail:\n%s", name, err, v.mustCatch, out)
			}
			var failed []string
			for _, m := range failedSubtest.FindAllSubmatch(out, -1) {
				failed = append(failed, string(m[1]))
			}
			if !slices.Contains(failed, v.mustCatch) {
				t.Fatalf("broken by %s: failed subtests %v, want %s among them:\n%s", name, failed, v.mustCatch, out)
			}
			t.Logf("broken by %s: failed subtests %v", name, failed)
		})
	}
}
