package kltype_test

import (
	"errors"
	"testing"

	"github.com/kinesislease/kinesislease/kltype"
)

// TestHealthOK: green means ready, live, no stream or shard set aside and
// no shard blocked; a read error retried while reading is not counted.
func TestHealthOK(t *testing.T) {
	green := func() kltype.Health {
		return kltype.Health{Ready: true, Live: true, Streams: []kltype.StreamHealth{{Stream: "orders", Shards: []kltype.ShardHealth{
			{ShardID: "0", Reading: true}, {ShardID: "1", Reading: true, Err: errors.New("throttled, retried")},
		}}}}
	}
	if h := green(); !h.OK() {
		t.Fatalf("%+v: not OK", h)
	}
	for name, change := range map[string]func(*kltype.Health){
		"not ready":        func(h *kltype.Health) { h.Ready = false },
		"not live":         func(h *kltype.Health) { h.Live = false },
		"stream set aside": func(h *kltype.Health) { h.Streams[0].Err = errors.New("denied") },
		"shard set aside": func(h *kltype.Health) {
			h.Streams[0].Shards[0] = kltype.ShardHealth{ShardID: "0", Err: errors.New("denied")}
		},
		"shard blocked": func(h *kltype.Health) { h.Streams[0].Shards[0].Blocked = &kltype.BlockedRecord{Attempts: 3} },
	} {
		h := green()
		change(&h)
		if h.OK() {
			t.Errorf("%s: OK", name)
		}
	}
	h := green()
	h.Streams[0].Shards[0].Blocked = &kltype.BlockedRecord{}
	if h.Streams[0].OK() || h.Streams[0].Shards[0].OK() || !h.Streams[0].Shards[1].OK() {
		t.Errorf("a shard blocked: stream OK %v, shard OK %v, the other shard OK %v; want false, false, true",
			h.Streams[0].OK(), h.Streams[0].Shards[0].OK(), h.Streams[0].Shards[1].OK())
	}
}
