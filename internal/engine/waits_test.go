package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/membership"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestWaitsTableInDocs: docs/lease-protocol.md states the waits on a
// recovered row at the library's defaults; they are computed here from the
// code's defaults, so that the page cannot drift from the code.
func TestWaitsTableInDocs(t *testing.T) {
	g, err := NewGroup(GroupConfig{
		Owner: "a", Store: memory.New(), Client: noKinesis{},
		Streams: []StreamConfig{{Stream: "s", Start: kltype.Latest, Worker: WorkerConfig{
			Handler: func(context.Context, *kltype.Record) error { return nil },
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	secs := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	rows := []string{
		fmt.Sprintf("| heartbeat interval | | %s |", secs(g.cfg.Heartbeat)),
		fmt.Sprintf("| timeout | | %s |", secs(g.cfg.Timeout)),
		fmt.Sprintf("| fence margin | timeout / 6 | %s |", secs(g.cfg.FenceMargin)),
		fmt.Sprintf("| checkpoint interval | | %s |", secs(g.streams["s"].cfg.Worker.CheckpointInterval)),
		fmt.Sprintf("| proof bound | checkpoint interval + timeout | %s |", secs(g.proof(g.streams["s"]))),
		fmt.Sprintf("| recovery wait: a recovered row is read, but by its last holder, only after | proof bound + fence margin | %s |", secs(g.recoveryWait(g.streams["s"]))),
		fmt.Sprintf("| late-write bound: rows of unanswered writes read again after | %d timeouts | %s |", lateBound, secs(lateBound*g.cfg.Timeout)),
		fmt.Sprintf("| a table is known old (a stream without a mark in it is new) once an entry has stood for | timeout | %s |", secs(g.cfg.Timeout)),
		fmt.Sprintf("| ... or at once, in a table whose header shows it born (created) more than | 2 timeouts ago | %s |", secs(2*g.cfg.Timeout)),
		fmt.Sprintf("| a new stream's rows are created once no member joined (its creator included) for | %d intervals | %s |", membership.SettleBeats, secs(membership.SettleBeats*g.cfg.Heartbeat)),
	}
	doc, err := os.ReadFile("../../docs/lease-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/lease-protocol.md lacks the row\n%s", row)
		}
	}
}
