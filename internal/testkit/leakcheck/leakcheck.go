// Package leakcheck finds the goroutines a test binary leaked: the check
// goleak's VerifyTestMain makes, kept in the repository so that a test-only
// module does not appear in the module graph of the services importing
// kinesislease.
//
// A package that does not use testutil opts in with
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// (testutil.Main runs the same check after stopping the emulators).
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Main runs the tests and, when they passed, fails the binary if a goroutine
// the tests started is still running (Find); it then exits.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Find returns an error listing the goroutines other than the caller's that
// are running and are not the runtime's or the testing package's own. A
// goroutine that is ending is given time to: Find looks again, with
// growing pauses, for about 1.5 seconds before it reports one.
func Find() error {
	self := current()
	var leaked []goroutine
	for i := 0; ; i++ {
		leaked = leaked[:0]
		for _, g := range all() {
			if g.id != self && !ignored(g) {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if i >= 20 {
			break
		}
		time.Sleep(min(time.Microsecond<<i, 100*time.Millisecond))
	}
	var b strings.Builder
	b.WriteString("found unexpected goroutines:")
	for _, g := range leaked {
		b.WriteString("\n\n")
		b.WriteString(g.full)
	}
	return fmt.Errorf("%s", b.String())
}

// goroutine is one goroutine of a runtime.Stack dump.
type goroutine struct {
	id    int
	state string   // "chan receive", "select", "syscall, 3 minutes"...
	funcs []string // its frames' functions, the innermost first, then its creator
	full  string   // the dump's text
}

func (g goroutine) first() string {
	if len(g.funcs) == 0 {
		return ""
	}
	return g.funcs[0]
}

func (g goroutine) has(fn string) bool {
	for _, f := range g.funcs {
		if f == fn {
			return true
		}
	}
	return false
}

// ignored says g is the testing package's, the runtime's or os/signal's:
// the goroutines goleak ignores by default.
func ignored(g goroutine) bool {
	switch g.first() {
	case "testing.RunTests", "testing.(*T).Run", "testing.(*T).Parallel", "testing.runFuzzing", "testing.runFuzzTests":
		if strings.HasPrefix(g.state, "chan receive") {
			return true
		}
	case "os/signal.signal_recv", "os/signal.loop":
		return true
	}
	if g.has("runtime.goexit") && strings.HasPrefix(g.state, "syscall") {
		return true
	}
	return g.has("runtime.ensureSigM") || g.has("runtime.ReadTrace")
}

func current() int {
	buf := make([]byte, 128)
	n := runtime.Stack(buf, false)
	gs := parse(buf[:n])
	if len(gs) == 0 {
		return -1
	}
	return gs[0].id
}

func all() []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return parse(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// parse splits a runtime.Stack dump into its goroutines.
func parse(dump []byte) []goroutine {
	var gs []goroutine
	for _, block := range bytes.Split(dump, []byte("\n\n")) {
		text := strings.TrimSpace(string(block))
		lines := strings.Split(text, "\n")
		// goroutine 18 [chan receive, 2 minutes]:
		head, ok := strings.CutPrefix(lines[0], "goroutine ")
		if !ok {
			continue
		}
		idText, rest, ok := strings.Cut(head, " [")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(idText)
		if err != nil {
			continue
		}
		g := goroutine{id: id, state: strings.TrimSuffix(rest, "]:"), full: text}
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "\t") || l == "" {
				continue // a file:line, or an empty line
			}
			if c, ok := strings.CutPrefix(l, "created by "); ok {
				// created by testing.(*T).Run in goroutine 7
				c, _, _ = strings.Cut(c, " in goroutine ")
				g.funcs = append(g.funcs, c)
				continue
			}
			if strings.HasPrefix(l, "...") {
				continue // ...additional frames elided...
			}
			// main.f(0xc000012345, {0x1, 0x2})
			if i := strings.LastIndexByte(l, '('); i > 0 && strings.HasSuffix(l, ")") {
				l = l[:i]
			}
			g.funcs = append(g.funcs, l)
		}
		gs = append(gs, g)
	}
	return gs
}
