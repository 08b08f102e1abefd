package kinesislease_test

import (
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testutil"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestScanReadsStable: once the assignment is stable, the instances together
// read each row about once per scan, not once per instance: a partial scan
// reads only the rows an instance watches, and every sixth scan is full.
func TestScanReadsStable(t *testing.T) {
	const shards, instances = 32, 4
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, shards)
	store := memory.New()
	ta := newTally()
	ins := map[string]*instance{}
	for _, o := range []string{"a", "b", "c", "d"} {
		ins[o] = start(t, kc, store, stream, o, ta, kinesislease.WithScanInterval(100*time.Millisecond), kinesislease.WithLeaseProtocol(kinesislease.PerRowRenewal))
	}
	waitSplit(t, stream, ins, []int{8, 8, 8, 8})

	// Wait for every instance to see the stable assignment (a full scan
	// after the last move), then count the reads over some scans.
	before := map[string]int64{}
	scansBefore := map[string]int64{}
	for o, in := range ins {
		st := in.svc.Stats(stream)
		for in.svc.Stats(stream).FullScans < st.FullScans+2 {
			time.Sleep(20 * time.Millisecond)
		}
		st = in.svc.Stats(stream)
		before[o], scansBefore[o] = st.Reads, st.Scans
	}
	for _, in := range ins {
		st := in.svc.Stats(stream)
		for in.svc.Stats(stream).Scans < st.Scans+24 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	var reads, naive int64
	for o, in := range ins {
		st := in.svc.Stats(stream)
		r, n := st.Reads-before[o], st.Scans-scansBefore[o]
		reads += r
		naive += n * int64(shards-len(in.svc.Held(stream)))
		t.Logf("instance %s: %d reads in %d scans (%d full in all)", o, r, n, st.FullScans)
	}
	t.Logf("reads: %d, a full read every scan would be %d (%.0f%%)", reads, naive, 100*float64(reads)/float64(naive))
	// Expected: per 6 scans, 5 partial (about 24/3 = 8 rows) and one full (24):
	// 64 of 144, 44%.
	if float64(reads) > 0.6*float64(naive) {
		t.Fatalf("stable assignment: %d reads, %.0f%% of reading every row every scan; want under 60%%", reads, 100*float64(reads)/float64(naive))
	}
	if len(ta.seen) != 0 {
		t.Fatalf("no record was put, yet %d were handled", len(ta.seen))
	}
}
