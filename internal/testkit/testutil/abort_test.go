package testutil

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// TestClientAbortDoesNotKillEmulator: a client that goes away in the middle of
// a request (a consumer cancelling a read) must not crash the Kinesis
// emulators; kinesalite would without the launcher's guard.
func TestClientAbortDoesNotKillEmulator(t *testing.T) {
	for _, e := range KinesisEmulators() {
		t.Run(string(e), func(t *testing.T) {
			endpoint := Endpoint(t, e)
			conn, err := net.Dial("tcp", strings.TrimPrefix(endpoint, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			// Headers promise a body that never comes; then the connection closes.
			_, err = conn.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.1\r\n" +
				"X-Amz-Target: Kinesis_20131202.ListStreams\r\nContent-Length: 1000\r\n\r\n{\"Lim"))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // let the server start reading the body
			conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 3 {
				if _, err := KinesisClient(t, e).ListStreams(ctx, &kinesis.ListStreamsInput{}); err != nil {
					t.Fatalf("call %d after a client abort: %v", i, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
