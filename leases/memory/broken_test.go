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
