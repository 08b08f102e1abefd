package harness

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/testutil"
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
// the instance would make, as holder or taker, fails with Err; reads still
// work.
type CutOffStore struct {
	leases.Store
	Cut *atomic.Bool
	Err error
}

func (s CutOffStore) Take(ctx context.Context, l leases.Lease, owner string, ttl time.Duration) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.Take(ctx, l, owner, ttl)
}

func (s CutOffStore) Renew(ctx context.Context, l leases.Lease, ttl time.Duration) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.Renew(ctx, l, ttl)
}

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

func (s CutOffStore) RequestHandoff(ctx context.Context, l leases.Lease, to string) (leases.Lease, error) {
	if s.Cut.Load() {
		return leases.Lease{}, s.Err
	}
	return s.Store.RequestHandoff(ctx, l, to)
}
