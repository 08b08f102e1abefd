package main

import (
	"encoding/json"
	"net/http"

	"github.com/kinesislease/kinesislease/kltype"
)

// healthHandler serves the service's health for probes:
//
//	GET /livez   200 while the instance may deliver (within its fence), else 503
//	GET /readyz  200 once it passed its start-up checks and joined, else 503
//	GET /healthz the whole snapshot as JSON (streams, shards, lag, errors), 200
//
// health is the service's Health method.
func healthHandler(health func() kltype.Health) http.Handler {
	mux := http.NewServeMux()
	probe := func(ok func(kltype.Health) bool) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if ok(health()) {
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte("ok\n"))
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ok\n"))
		}
	}
	mux.HandleFunc("GET /livez", probe(func(h kltype.Health) bool { return h.Live }))
	mux.HandleFunc("GET /readyz", probe(func(h kltype.Health) bool { return h.Ready }))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(healthJSON(health()))
	})
	return mux
}

// healthJSON is kltype.Health with its errors as strings.
func healthJSON(h kltype.Health) any {
	type shard struct {
		ShardID            string `json:"shard_id"`
		Reading            bool   `json:"reading"`
		MillisBehindLatest int64  `json:"millis_behind_latest"`
		Err                string `json:"error,omitempty"`
		RetryAt            string `json:"retry_at,omitempty"`
	}
	type stream struct {
		Stream string  `json:"stream"`
		Err    string  `json:"error,omitempty"`
		Shards []shard `json:"shards"`
	}
	out := struct {
		Owner   string   `json:"owner"`
		Ready   bool     `json:"ready"`
		Live    bool     `json:"live"`
		Streams []stream `json:"streams"`
	}{Owner: h.Owner, Ready: h.Ready, Live: h.Live}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	for _, s := range h.Streams {
		js := stream{Stream: s.Stream, Err: errText(s.Err), Shards: []shard{}}
		for _, sh := range s.Shards {
			x := shard{ShardID: sh.ShardID, Reading: sh.Reading, MillisBehindLatest: sh.MillisBehindLatest, Err: errText(sh.Err)}
			if !sh.RetryAt.IsZero() {
				x.RetryAt = sh.RetryAt.UTC().Format("2006-01-02T15:04:05Z07:00")
			}
			js.Shards = append(js.Shards, x)
		}
		out.Streams = append(out.Streams, js)
	}
	return out
}
