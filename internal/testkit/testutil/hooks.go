package testutil

import (
	"sync"

	"github.com/kinesislease/kinesislease/kltype"
)

// Failures is a kltype.HookFailed that keeps every call, for tests.
type Failures struct {
	mu  sync.Mutex
	got []kltype.FailureInfo
}

// OnFailed implements kltype.HookFailed.
func (f *Failures) OnFailed(i kltype.FailureInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, i)
}

// All returns the calls so far, oldest first.
func (f *Failures) All() []kltype.FailureInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]kltype.FailureInfo(nil), f.got...)
}
