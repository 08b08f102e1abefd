package memory

// The conformance suite checked against stores broken on purpose: each
// variant below breaks one rule of the lease contract, and the subtest of
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
	"github.com/kinesislease/kinesislease/leases/leasestest"
)

const brokenEnv = "KINESISLEASE_LEASESTEST_BROKEN"

// A broken variant: the store, and the leasestest subtest that must catch it.
type brokenVariant struct {
	store     func() leases.Store
	mustCatch string
}

var brokenVariants = map[string]brokenVariant{
	// Renew stamps now+ttl with a clock that stands still: takers cannot
	// tell its renewals from none.
	"renew-frozen-clock": {func() leases.Store { return blindRenew{frozen()} }, "RenewMovesExpiresAtLater"},
	// Renew stamps now+ttl with a real clock: renewals in one millisecond
	// repeat ExpiresAt, and a shorter duration moves it back.
	"renew-blind": {func() leases.Store { return blindRenew{New()} }, "RenewMovesExpiresAtLater"},
	// Renew only avoids repeating the value it replaces: a clock that
	// stepped back moves ExpiresAt back, and a later renewal can write a
	// value a taker saw before.
	"renew-differs-only": {func() leases.Store { return differsRenew{New()} }, "RenewMovesExpiresAtLater"},
	// RequestHandoff refreshes ExpiresAt: a requester keeps a dead holder's
	// lease alive.
	"handoff-refreshes-expiry": {func() leases.Store { return refreshingHandoff{New()} }, "RequestsAreNoSignOfLife"},
	// A Rewind of a held row refreshes ExpiresAt.
	"rewind-refreshes-expiry": {func() leases.Store { return refreshingRewind{New()} }, "RequestsAreNoSignOfLife"},
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
	// ReplaceMember checks the incarnation only: a live entry seen stale
	// once is replaced.
	"replace-ignores-heartbeat": {func() leases.Store { return replaceIgnoresHeartbeat{New()} }, "Membership/ReplaceMemberOnlyIfSeen"},
	// TakeAs stamps ExpiresAt as Take does.
	"takeas-stamps-expiry": {func() leases.Store { return stampingTakeAs{New()} }, "Membership/TakeAs"},
	// Take leaves the incarnation of a TakeAs in place.
	"take-keeps-incarnation": {func() leases.Store { return keepingTake{New()} }, "Membership/TakeClearsIncarnation"},
	// Release leaves the incarnation in place.
	"release-keeps-incarnation": {func() leases.Store { return keepingRelease{New()} }, "Membership/ReleaseClearsIncarnation"},
	// Lease methods accept the key of a membership row.
	"member-key-is-lease": {func() leases.Store { return memberKeyLease{New()} }, "Membership/MembershipRowsAreNotLeases"},
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

func frozen() *Store {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return New(WithClock(func() time.Time { return t }))
}

type blindRenew struct{ *Store }

func (b blindRenew) Renew(ctx context.Context, l leases.Lease, ttl time.Duration) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("Renew", l, true, func(r *leases.Lease) error {
		r.ExpiresAt = b.now().Add(ttl)
		return nil
	})
}

type differsRenew struct{ *Store }

func (b differsRenew) Renew(ctx context.Context, l leases.Lease, ttl time.Duration) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("Renew", l, true, func(r *leases.Lease) error {
		e := b.now().Add(ttl)
		if e.UnixMilli() == r.ExpiresAt.UnixMilli() {
			e = r.ExpiresAt.Add(time.Millisecond)
		}
		r.ExpiresAt = e
		return nil
	})
}

type refreshingHandoff struct{ *Store }

func (b refreshingHandoff) RequestHandoff(ctx context.Context, l leases.Lease, to string) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	if err := leases.ValidateOwner(to); err != nil {
		return leases.Lease{}, err
	}
	return b.write("RequestHandoff", l, true, func(r *leases.Lease) error {
		r.HandoffTo = to
		r.ExpiresAt = b.now().Add(time.Minute)
		return nil
	})
}

type refreshingRewind struct{ *Store }

func (b refreshingRewind) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if l.Owner == "" || cp.Sequence == "" {
		return b.Store.Rewind(ctx, l, cp)
	}
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("Rewind", l, true, func(r *leases.Lease) error {
		r.RewindTo = cp
		r.ExpiresAt = b.now().Add(time.Minute)
		return nil
	})
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
	if b.members[row] == nil {
		b.members[row] = map[string]leases.Member{}
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
	if cur, ok := b.members[row][m.Owner]; ok && !b.ok(cur, m) {
		return nil, &leases.MemberConflictError{Op: "Heartbeat", Row: row, Owner: m.Owner, Current: cur}
	}
	if b.members[row] == nil {
		b.members[row] = map[string]leases.Member{}
	}
	b.members[row][m.Owner] = m
	return sortedMembers(b.members[row]), nil
}

type droppingEnded struct{ *Store }

func (b droppingEnded) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	m.Ended = 0
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

type stampingTakeAs struct{ *Store }

func (b stampingTakeAs) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("TakeAs", l, false, func(r *leases.Lease) error {
		r.Owner, r.Incarnation, r.HandoffTo = owner, inc, ""
		r.ExpiresAt = b.now().Add(time.Minute)
		return nil
	})
}

type keepingTake struct{ *Store }

func (b keepingTake) Take(ctx context.Context, l leases.Lease, owner string, ttl time.Duration) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("Take", l, false, func(r *leases.Lease) error {
		r.Owner, r.HandoffTo = owner, ""
		r.ExpiresAt = b.now().Add(ttl)
		return nil
	})
}

type keepingRelease struct{ *Store }

func (b keepingRelease) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return b.write("Release", l, true, func(r *leases.Lease) error {
		r.Owner, r.HandoffTo, r.ExpiresAt = "", "", time.Time{}
		if !cp.IsZero() {
			r.Checkpoint = cp
		}
		return nil
	})
}

type memberKeyLease struct{ *Store }

func (b memberKeyLease) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	if err := key.Validate(); err != nil || !leases.IsMemberKey(key.String()) {
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
