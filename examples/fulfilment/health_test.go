package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kinesislease/kinesislease/kltype"
)

// TestHealthHandler: the probes answer 200 or 503 from Live and Ready, and
// /healthz carries the snapshot with its errors as text.
func TestHealthHandler(t *testing.T) {
	h := kltype.Health{Owner: "a", Ready: true, Live: false, Streams: []kltype.StreamHealth{{Stream: "fulfilment",
		Shards: []kltype.ShardHealth{{ShardID: "shardId-000000000001", MillisBehindLatest: -1, Err: errors.New("denied")}}}}}
	srv := httptest.NewServer(healthHandler(func() kltype.Health { return h }))
	defer srv.Close()
	for path, want := range map[string]int{"/livez": http.StatusServiceUnavailable, "/readyz": http.StatusOK, "/healthz": http.StatusOK} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, res.StatusCode, want)
		}
		if path == "/healthz" {
			var got struct {
				Live    bool
				Streams []struct{ Shards []struct{ Error string } }
			}
			if err := json.NewDecoder(res.Body).Decode(&got); err != nil || got.Live || got.Streams[0].Shards[0].Error != "denied" {
				t.Errorf("GET /healthz: %+v (%v)", got, err)
			}
		}
		res.Body.Close()
	}
}
