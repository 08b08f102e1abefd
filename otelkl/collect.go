package otelkl

import (
	"context"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
	"go.opentelemetry.io/otel/metric"
)

// The asynchronous instruments, read at each collection: the counters the
// hooks add to, and from each service's Health the age of each shard's
// oldest unresolved record and the service's part of its fleet's load.

// observe reports the record counts of every shard seen and the lag of every
// shard held (MillisBehindLatest, in seconds).
func (h *Hooks) observe(_ context.Context, o metric.Observer) error {
	count := func(st *outcomeState) {
		if st == nil {
			return
		}
		if n := st.records.Load(); n > 0 {
			o.ObserveInt64(h.records, n, st.a.obs...)
			o.ObserveInt64(h.recordBytes, st.bytes.Load(), st.a.obs...)
		}
	}
	h.shards.Range(func(_, v any) bool {
		for _, st := range v.(*shardAttrs).outcome {
			count(st)
		}
		return true
	})
	h.outcomes.Range(func(_, v any) bool {
		count(v.(*outcomeState))
		return true
	})

	type obs struct {
		a   *attrs
		lag int64
	}
	h.mu.Lock()
	out := make([]obs, 0, len(h.lag))
	if h.cfg.noShard {
		perStream := map[string]int64{}
		for k, v := range h.lag {
			if cur, ok := perStream[k.stream]; !ok || v > cur {
				perStream[k.stream] = v
			}
		}
		for stream, v := range perStream {
			out = append(out, obs{h.shardAttrs(stream, "").shard, v})
		}
	} else {
		for k, v := range h.lag {
			out = append(out, obs{h.shardAttrs(k.stream, k.shard).shard, v})
		}
	}
	sources := h.health
	h.mu.Unlock()
	for _, x := range out {
		o.ObserveFloat64(h.lagGauge, float64(x.lag)/1000, x.a.obs...)
	}
	healths := make([]kltype.Health, len(sources))
	for i, health := range sources {
		healths[i] = health() // once per service and collection
	}
	h.observeAges(o, healths)
	h.observeBalance(o, healths)
	return nil
}

// observeAges reports the age of the oldest unresolved record of every
// shard the services of healths hold (the largest per stream without
// shard ids).
func (h *Hooks) observeAges(o metric.Observer, healths []kltype.Health) {
	ages := map[shardKey]time.Duration{}
	for _, health := range healths {
		for _, st := range health.Streams {
			for _, sh := range st.Shards {
				if !sh.Reading && sh.OldestUnresolvedAge == 0 {
					continue // set aside, or not read yet
				}
				k := shardKey{st.Stream, sh.ShardID}
				if h.cfg.noShard {
					k.shard = ""
				}
				if cur, ok := ages[k]; !ok || sh.OldestUnresolvedAge > cur {
					ages[k] = sh.OldestUnresolvedAge
				}
			}
		}
	}
	for k, age := range ages {
		o.ObserveFloat64(h.ageGauge, age.Seconds(), h.shardAttrs(k.stream, k.shard).shard.obs...)
	}
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
