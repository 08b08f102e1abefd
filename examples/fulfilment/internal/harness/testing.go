package harness

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
)

// What the packages' tests share. The test binary's TestMain must call
// testutil.Main.

// TestEnv creates a lease table and a stream of shards shards on the test
// binary's emulators (removed when the test ends) and returns where they
// are.
func TestEnv(t testing.TB, shards int32) (e Env, table, stream string) {
	t.Helper()
	dc := testutil.DynamoClient(t)
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	table, stream = testutil.TableName(t), testutil.StreamName(t)
	testutil.CreateLeaseTable(t, dc, table)
	testutil.CreateStream(t, kc, stream, shards)
	e = Env{
		DynamoEndpoint:  testutil.Endpoint(t, testutil.DynamoDBLocal),
		KinesisEndpoint: testutil.Endpoint(t, testutil.Kinesalite),
		AWS:             testutil.Config(t),
		Dynamo:          dc,
		Kinesis:         kc,
	}
	return e, table, stream
}

// TestLog returns a writer that logs each write to t, as one entry without
// its trailing newline.
func TestLog(t testing.TB) io.Writer { return testLog{t} }

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// CutOffStore is the lease store of an instance cut off from it once Cut is
// set (a network partition, or a process that died at once): every write
// the instance would make, heartbeats included, fails with Err; reads still
// work. Store must implement leases.Membership.
type CutOffStore struct {
	leases.Store
	Cut *atomic.Bool
	Err error
}

var _ leases.Membership = CutOffStore{}

func (s CutOffStore) mem() leases.Membership { return s.Store.(leases.Membership) }

func (s CutOffStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.Checkpoint(ctx, l, cp)
}

func (s CutOffStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.Release(ctx, l, cp)
}

func (s CutOffStore) Create(ctx context.Context, k leases.Key) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.Create(ctx, k)
}

func (s CutOffStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.Rewind(ctx, l, cp)
}

func (s CutOffStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.ApplyRewind(ctx, l)
}

func (s CutOffStore) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.mem().TakeAs(ctx, l, owner, inc)
}

// Join implements leases.Membership.
func (s CutOffStore) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if s.Cut.Load() {
		return nil, s.Err
	}
	return s.mem().Join(ctx, row, m)
}

// Header implements leases.Membership.
func (s CutOffStore) Header(ctx context.Context) (leases.MemberHeader, error) {
	if s.Cut.Load() {
		return leases.MemberHeader{}, s.Err
	}
	return s.mem().Header(ctx)
}

// LastRewind implements leases.Membership.
func (s CutOffStore) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	if s.Cut.Load() {
		return leases.RewindRecord{}, s.Err
	}
	return s.mem().LastRewind(ctx, key)
}

// MarkStream implements leases.Membership.
func (s CutOffStore) MarkStream(ctx context.Context, stream string, m leases.Mark) (leases.Mark, error) {
	if s.Cut.Load() {
		return leases.Mark{}, s.Err
	}
	return s.mem().MarkStream(ctx, stream, m)
}

// MarkTaken implements leases.Membership.
func (s CutOffStore) MarkTaken(ctx context.Context, key leases.Key, token string) (string, error) {
	if s.Cut.Load() {
		return "", s.Err
	}
	return s.mem().MarkTaken(ctx, key, token)
}

// StreamMark implements leases.Membership.
func (s CutOffStore) StreamMark(ctx context.Context, stream string) (leases.Mark, error) {
	if s.Cut.Load() {
		return leases.Mark{}, s.Err
	}
	return s.mem().StreamMark(ctx, stream)
}

// BumpRow implements leases.Membership.
func (s CutOffStore) BumpRow(ctx context.Context, row int) error {
	if s.Cut.Load() {
		return s.Err
	}
	return s.mem().BumpRow(ctx, row)
}

// ReportVanished implements leases.Membership.
func (s CutOffStore) ReportVanished(ctx context.Context) error {
	if s.Cut.Load() {
		return s.Err
	}
	return s.mem().ReportVanished(ctx)
}

// CreateAs implements leases.Membership.
func (s CutOffStore) CreateAs(ctx context.Context, key leases.Key, owner, inc string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.mem().CreateAs(ctx, key, owner, inc, cp, rewind)
}

func (s CutOffStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if s.Cut.Load() {
		return nil, s.Err
	}
	return s.mem().Heartbeat(ctx, row, m)
}

func (s CutOffStore) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	if s.Cut.Load() {
		return nil, s.Err
	}
	return s.mem().ReplaceMember(ctx, row, seen, next)
}

func (s CutOffStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	return s.mem().Members(ctx, row)
}
