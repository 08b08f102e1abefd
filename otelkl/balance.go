package otelkl

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kinesislease/kinesislease/kltype"
)

// The balance gauges: each running service's part of its fleet's load,
// from its Health (kltype.BalanceHealth), per owner.

// newBalanceGauges creates the balance gauges with m.
func (h *Hooks) newBalanceGauges(m metric.Meter) error {
	var errs [5]error
	h.loadGauge, errs[0] = m.Int64ObservableGauge(MetricMemberLoad, metric.WithUnit("By/s"),
		metric.WithDescription("This instance's load: the bytes per second read from the shards it holds (a decayed average over about a minute), as its membership entry publishes it."))
	h.shareGauge, errs[1] = m.Float64ObservableGauge(MetricMemberShare, metric.WithUnit("1"),
		metric.WithDescription("This instance's fraction of its fleet's load (0 while the fleet carries none)."))
	h.fairGauge, errs[2] = m.Float64ObservableGauge(MetricMemberFairShare, metric.WithUnit("1"),
		metric.WithDescription("The fraction of its fleet's load the plan aims to give this instance: its capacity divided by its cost, over the same of the fleet's members."))
	h.utilGauge, errs[3] = m.Float64ObservableGauge(MetricMemberUtilization, metric.WithUnit("1"),
		metric.WithDescription("This instance's utilization of its capacity as its membership entry publishes it (WithUtilization; 1 when fully used, 0 when none is published)."))
	h.costGauge, errs[4] = m.Float64ObservableGauge(MetricMemberCost, metric.WithUnit("1"),
		metric.WithDescription("This instance's cost factor in the plan by load: its cost per byte over its fleet's, from 1 to 3 (1 when no utilization is published); its fair share is divided by it."))
	return errors.Join(errs[:]...)
}

type memberKey struct{ owner string }

// memberAttrs are the attributes of an instance's balance gauges: the
// system, the consumer group and its owner id (no stream: the load is the
// instance's, over every stream it reads).
func (h *Hooks) memberAttrs(owner string) *attrs {
	return h.cached(memberKey{owner}, func() []attribute.KeyValue {
		kv := []attribute.KeyValue{AttrSystem.String(SystemKinesis)}
		if h.cfg.group != "" {
			kv = append(kv, AttrConsumerGroup.String(h.cfg.group))
		}
		return append(kv, AttrOwner.String(owner))
	})
}

// observeBalance reports the load, share, fair share, utilization and cost
// of every service of healths that runs (it has seen its fleet).
func (h *Hooks) observeBalance(o metric.Observer, healths []kltype.Health) {
	for _, health := range healths {
		b := health.Balance
		if b.Members == 0 {
			continue // before Run, or after it returned
		}
		a := h.memberAttrs(health.Owner)
		o.ObserveInt64(h.loadGauge, b.Load, a.obs...)
		o.ObserveFloat64(h.shareGauge, b.Share, a.obs...)
		o.ObserveFloat64(h.fairGauge, b.FairShare, a.obs...)
		o.ObserveFloat64(h.utilGauge, b.Utilization, a.obs...)
		o.ObserveFloat64(h.costGauge, b.Cost, a.obs...)
	}
}
