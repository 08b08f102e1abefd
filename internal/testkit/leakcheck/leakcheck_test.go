package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestFindLeak(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		leakcheckBlocked(stop)
	}()
	err := Find()
	close(stop)
	<-done
	if err == nil || !strings.Contains(err.Error(), "leakcheckBlocked") {
		t.Fatalf("Find() = %v, want the blocked goroutine", err)
	}
	if err := Find(); err != nil {
		t.Fatalf("Find() after the goroutine ended = %v", err)
	}
}

func TestFindEnding(t *testing.T) {
	// A goroutine that ends while Find looks is not reported.
	go time.Sleep(50 * time.Millisecond)
	if err := Find(); err != nil {
		t.Fatalf("Find() = %v", err)
	}
}

func TestParse(t *testing.T) {
	dump := "goroutine 7 [chan receive, 2 minutes]:\n" +
		"testing.(*T).Run(0xc000003340, {0x5a1c2b, 0x4}, 0x5b3e10)\n\t/go/src/testing/testing.go:1751 +0x3ab\n" +
		"main.main()\n\t/x/main.go:3 +0x1\n" +
		"created by testing.(*T).Run in goroutine 1\n\t/go/src/testing/testing.go:1700 +0x1\n\n" +
		"goroutine 8 [select]:\nmain.f(...)\n\t/x/main.go:9\n...additional frames elided...\n"
	gs := parse([]byte(dump))
	if len(gs) != 2 {
		t.Fatalf("parse: %d goroutines, want 2", len(gs))
	}
	g := gs[0]
	if g.id != 7 || g.state != "chan receive, 2 minutes" || g.first() != "testing.(*T).Run" || !g.has("main.main") || !ignored(g) {
		t.Errorf("parse: %+v", g)
	}
	if gs[1].id != 8 || gs[1].first() != "main.f" || ignored(gs[1]) {
		t.Errorf("parse: %+v", gs[1])
	}
}

//go:noinline
func leakcheckBlocked(stop chan struct{}) { <-stop }
