package kinesisleasetest_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// panicTB is the testing.TB of the examples, which have no *testing.T: a
// failure panics. In a test, pass t.
func panicTB() testing.TB { return panicT{} }

type panicT struct{ testing.TB }

func (panicT) Helper()                         {}
func (panicT) Cleanup(func())                  {}
func (panicT) Fatal(args ...any)               { panic(fmt.Sprint(args...)) }
func (panicT) Fatalf(format string, a ...any)  { panic(fmt.Sprintf(format, a...)) }
func (panicT) Errorf(format string, a ...any)  { panic(fmt.Sprintf(format, a...)) }
func (panicT) Logf(format string, args ...any) {}

// fakeTB observes the failures of the code under test: Fatalf records its
// message and stops the goroutine, as testing's does.
type fakeTB struct {
	testing.TB // nil: a method not overridden here panics

	mu      sync.Mutex
	fatals  []string
	helpers int
}

func (f *fakeTB) Helper() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.helpers++
}

func (f *fakeTB) Cleanup(func()) {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// fatal runs fn with a fakeTB on a goroutine of its own and returns the
// message of the Fatalf that stopped it; ok is false if fn returned.
func fatal(t *testing.T, fn func(tb testing.TB)) (msg string, ok bool) {
	t.Helper()
	f := &fakeTB{}
	done := make(chan bool)
	go func() {
		returned := false
		defer func() { done <- returned }()
		fn(f)
		returned = true
	}()
	returned := <-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if returned {
		if len(f.fatals) > 0 {
			t.Fatalf("fn returned after Fatalf(%q)", f.fatals[0])
		}
		return "", false
	}
	if len(f.fatals) != 1 {
		t.Fatalf("fn stopped with %d Fatalf calls, want 1: %q", len(f.fatals), f.fatals)
	}
	if f.helpers == 0 {
		t.Errorf("Fatalf(%q) without tb.Helper()", f.fatals[0])
	}
	return f.fatals[0], true
}
