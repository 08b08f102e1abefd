package otelkl_test

import (
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/otelkl"
)

// TestBalanceGauges: the balance gauges report, at each collection, the
// Load, Share, FairShare, Utilization and Cost of each running service's
// Health (HookHealth), per owner, with the consumer group; a service not
// running (no members seen) is left out.
func TestBalanceGauges(t *testing.T) {
	h, collect := newHooks(t, otelkl.WithConsumerGroup("billing"))
	running := kltype.Health{Owner: "a", Balance: kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Capacity: 2, Load: 3000, FleetLoad: 4000,
		Members: 3, Utilization: 0.8, Cost: 2.3, FairShare: 0.5, Share: 0.75}}
	h.OnHealthSource(func() kltype.Health { return running })
	h.OnHealthSource(func() kltype.Health { return kltype.Health{Owner: "idle", Balance: kltype.BalanceHealth{Capacity: 1}} }) // not running
	ms := collect(t)
	checkSchema(t, ms, false, otelkl.AttrConsumerGroup)
	owner, group := otelkl.AttrOwner.String("a"), otelkl.AttrConsumerGroup.String("billing")
	load, ok := ms["kinesislease.member.load"].Data.(metricdata.Gauge[int64])
	if !ok || len(load.DataPoints) != 1 || load.DataPoints[0].Value != 3000 || !load.DataPoints[0].Attributes.HasValue(otelkl.AttrOwner) {
		t.Fatalf("kinesislease.member.load: %+v, want one point of 3000 for owner a", ms["kinesislease.member.load"].Data)
	}
	if v, _ := load.DataPoints[0].Attributes.Value(otelkl.AttrOwner); v.AsString() != "a" {
		t.Errorf("kinesislease.member.load of owner %q, want a", v.AsString())
	}
	ms.wantGauge(t, "kinesislease.member.share", 0.75, owner, group)
	ms.wantGauge(t, "kinesislease.member.fair_share", 0.5, owner, group)
	ms.wantGauge(t, "kinesislease.member.utilization", 0.8, owner, group)
	ms.wantGauge(t, "kinesislease.member.cost", 2.3, owner, group)
	for _, name := range []string{"kinesislease.member.share", "kinesislease.member.fair_share", "kinesislease.member.utilization", "kinesislease.member.cost"} {
		if _, n := ms.gaugeSum(t, name); n != 1 {
			t.Errorf("%s: %d points, want 1 (a service not running reported?)", name, n)
		}
	}

	running.Balance.Load, running.Balance.Share = 1000, 0.25
	running.Balance.Utilization, running.Balance.Cost = 0.3, 1
	ms = collect(t)
	ms.wantGauge(t, "kinesislease.member.share", 0.25, owner)
	ms.wantGauge(t, "kinesislease.member.utilization", 0.3, owner)
	ms.wantGauge(t, "kinesislease.member.cost", 1, owner)
	if p := ms["kinesislease.member.load"].Data.(metricdata.Gauge[int64]).DataPoints; len(p) != 1 || p[0].Value != 1000 {
		t.Errorf("kinesislease.member.load at the second collection: %+v, want 1000", p)
	}
}
