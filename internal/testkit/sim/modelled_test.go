package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/testkit/ddbmeter"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// modelledEnv names the size of TestBilledUnitsModelled:
// "members x shards / engine members", as 5000x1000/100.
const modelledEnv = "KINESISLEASE_SIM_LARGE_MODELLED"

// modelledClient is the first ddbmeter client id of the modelled members
// (the engine members are 0 to E-1).
const modelledClient = 1 << 20

// TestBilledUnitsModelled bills a fleet too large to simulate whole in one
// process (5,000 engine Groups need about 54 GiB: each keeps a view and a
// planner ring of every member): E engine Groups (the real protocol, each
// on its own DynamoDB store over one ddbmeter.Table, as in TestBilledUnits)
// among N-E modelled members that only do what a member's steady state
// does to the table at the library's defaults: an entry joined before the
// engine members start (rows packed from row 0, as members that joined
// one at a time), a heartbeat every interval (jittered ±10%), a read of
// the next row every interval (the watched row), and a read of the header
// every N × read units / 1,000 seconds (the engine's headerEvery). They do
// not re-read the rows whose roster changed nor take any lease (the plan
// gives them their shares, which stay unheld).
//
// So the engine members' own figures (per instance, steady state and
// start, on a membership of N members) are the protocol's; the items'
// figures are the engine members' and the model's together, without the
// re-reads of roster changes by the modelled members (each engine join at
// the start would make N-E more reads of its row).
//
// It runs only with KINESISLEASE_SIM_LARGE and KINESISLEASE_SIM_LARGE_MODELLED
// set (as 5000x1000/100), and logs what it measured; it checks the goals
// of TestBilledUnits for the engine members and the items.
func TestBilledUnitsModelled(t *testing.T) {
	largeOnly(t)
	v := os.Getenv(modelledEnv)
	if v == "" {
		t.Skipf("set %s (as 5000x1000/100: members x shards / engine members)", modelledEnv)
	}
	var n, shards, e int
	if _, err := fmt.Sscanf(v, "%dx%d/%d", &n, &shards, &e); err != nil || e < 2 || n <= e || shards < 1 {
		t.Fatalf("%s=%q: want members x shards / engine members, as 5000x1000/100", modelledEnv, v)
	}
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, e, shards)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		m := n - e
		rows := (m + driver.RowCapacity - 1) / driver.RowCapacity
		for j := range m {
			store := dynamo.New(aws.Config{}, "large", dynamo.WithDynamoDBClient(f.table.Client(modelledClient+j)))
			row := j / driver.RowCapacity
			owner := fmt.Sprintf("model-%05d-", j)
			me := leases.Member{Owner: owner + strings.Repeat("x", ownerIDLen-len(owner)), Incarnation: driver.NewIncarnation(row, fmt.Sprint(j)), Heartbeat: 1}
			if _, err := store.Join(ctx, row, me); err != nil {
				t.Fatal(err)
			}
			if j%driver.RowCapacity == 0 {
				// One header write a row: hundreds in one second throttle
				// the header (a bump costs a write unit per KB of it), so
				// the setup waits a second and goes on.
				for try := 0; ; try++ {
					err := store.BumpRow(ctx, row)
					if err == nil {
						break
					}
					if try == 100 {
						t.Fatal(err)
					}
					time.Sleep(time.Second)
				}
			}
			wg.Go(func() { modelMember(ctx, store, f.table, me, row, rows, n, uint64(j)) })
		}
		t.Logf("%d modelled members in rows 0 to %d (written in %v); %d engine members start within %v", m, rows-1, time.Since(f.start), e, billStartSpread)
		f.start = time.Now()
		bs := f.table.Bill() // the setup's: not the start's
		f.table.ResetPeaks()
		f.run(startOffsets(e, billStartSpread, 1))
		defer f.report()
		defer func() {
			cancel()
			wg.Wait()
		}()
		defer f.stop()

		// Settled: every engine member joined, and no lease acquired for
		// billSettled.
		last, lastAt := -1, time.Now()
		for time.Since(f.start) < billSettleMax {
			time.Sleep(time.Second)
			joined := 0
			for _, mm := range f.members {
				if _, ok := driver.IncarnationRow(mm.group.Incarnation()); ok {
					joined++
				}
			}
			if acq := f.eventCounts()[observe.LeaseAcquired]; acq != last {
				last, lastAt = acq, time.Now()
			}
			if joined == e && time.Since(lastAt) >= billSettled {
				break
			}
		}
		t.Logf("settled %v after the start: %d leases acquired", time.Since(f.start).Round(time.Millisecond), last)
		b0, t0 := f.table.Bill(), time.Now()
		f.table.ResetPeaks()
		time.Sleep(billWindow)
		b1 := f.table.Bill()
		s := time.Since(t0).Seconds()

		var start, win ddbmeter.Units
		var hdr, rowR, maxW, maxR float64
		for id := range e {
			start = start.Add(b0.ByClient[id])
			d := b1.ByClient[id].Sub(b0.ByClient[id])
			win = win.Add(d)
			maxW = max(maxW, d.WCU/s)
			var mr float64
			for kind, u := range b1.ByClientKind[id] {
				du := u.Sub(b0.ByClientKind[id][kind])
				switch kind {
				case kindHeader:
					hdr += du.RCU / s
					mr += du.RCU
				case kindRow:
					rowR += du.RCU / s
					mr += du.RCU
				}
			}
			maxR = max(maxR, mr/s)
		}
		fe := float64(e)
		var hotW, hotR float64
		var hotWKey, hotRKey string
		var throttled int64
		for k, u := range b1.ByKey {
			d := u.Sub(b0.ByKey[k])
			throttled += d.Throttled
			if d.WCU/s > hotW {
				hotW, hotWKey = d.WCU/s, k
			}
			if d.RCU/s > hotR {
				hotR, hotRKey = d.RCU/s, k
			}
		}
		var startThrottled int64
		for k, u := range b0.ByKey {
			startThrottled += u.Sub(bs.ByKey[k]).Throttled
		}
		sw, pw, sr, pr := peaks(b0.Peaks)
		ww, wpw, wr, wpr := peaks(b1.Peaks)
		t.Logf("the start, until %v after it, per engine member: %.0f reads (%.0f RCU), %.0f writes; peak seconds of one item (engine and modelled members) %.0f WCU (%s), %.0f RCU (%s); %d calls throttled",
			t0.Sub(f.start).Round(time.Millisecond), float64(start.Reads)/fe, start.RCU/fe, float64(start.Writes)/fe, pw.WCU, sw, pr.RCU, sr, startThrottled)
		t.Logf("steady state (%v window), per engine member: %.2f WCU/s (busiest %.2f), %.2f RCU/s of membership = %.2f header + %.2f rows (busiest %.2f)",
			billWindow, win.WCU/s/fe, maxW, (hdr+rowR)/fe, hdr/fe, rowR/fe, maxR)
		t.Logf("items (engine and modelled members): hottest %.1f WCU/s (%s), %.1f RCU/s (%s); peak seconds %.0f WCU (%s), %.0f RCU (%s); %d calls throttled in the window",
			hotW, hotWKey, hotR, hotRKey, wpw.WCU, ww, wpr.RCU, wr, throttled)
		t.Logf("item sizes at the end of the window: %s", f.itemSizes())
		if w := win.WCU / s / fe; w > goalWCU || maxW > goalWCU {
			t.Errorf("writes: %.2f WCU/s per engine member (the busiest %.2f); goal %v", w, maxW, goalWCU)
		}
		if r := (hdr + rowR) / fe; r > goalRCU || maxR > goalRCU {
			t.Errorf("membership reads: %.2f RCU/s per engine member (the busiest %.2f); goal %v", r, maxR, goalRCU)
		}
		if hotW > goalItemWCU || hotR > goalItemRCU {
			t.Errorf("hottest items: %s %.1f WCU/s, %s %.1f RCU/s; goal at most %v and %v", hotWKey, hotW, hotRKey, hotR, goalItemWCU, goalItemRCU)
		}
		if throttled > 0 {
			t.Errorf("%d calls throttled in the steady-state window", throttled)
		}
	})
	t.Logf("%s: wall time %v; %s", v, time.Since(wall).Round(time.Second), memNow())
}

// modelMember is a modelled member's load on the table until ctx ends (see
// TestBilledUnitsModelled): a heartbeat and a read of the next row every
// interval, a read of the header every n × read units / 1,000 seconds
// (the first at a random point of that period).
func modelMember(ctx context.Context, store *dynamo.Store, table *ddbmeter.Table, me leases.Member, row, rows, n int, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x30de1))
	// The first header read at a random point of its period: members
	// started at once read it spread over the period, as members that
	// joined at different times (not all in the same second).
	headerAt := time.Now().Add(-time.Duration(r.Float64() * float64(time.Duration(n)*time.Second/1000)))
	for {
		wait := engine.DefaultHeartbeat + time.Duration((r.Float64()*0.2-0.1)*float64(engine.DefaultHeartbeat))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		me.Heartbeat++
		hctx, cancel := context.WithTimeout(ctx, engine.DefaultHeartbeat/2)
		store.Heartbeat(hctx, row, me)
		store.Members(hctx, (row+1)%rows)
		units := (ddbmeter.Size(table.Item(driver.MemberHeaderKey)) + 4095) / 4096
		if every := time.Duration(float64(n*max(units, 1)) / 1000 * float64(time.Second)); time.Since(headerAt) >= every {
			store.Header(hctx)
			headerAt = time.Now()
		}
		cancel()
	}
}
