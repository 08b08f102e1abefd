package sim

// The errors FaultStore makes up: ErrInjected and InjectedError for a call
// that did not reach the store, ResponseLostError for a timeout after the
// write landed or while it is still on its way.

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kinesislease/kinesislease/leases"
)

// ErrInjected is matched (errors.Is) by the errors FaultStore makes up for a
// call that did not reach the store.
var ErrInjected = errors.New("sim: injected store failure")

// InjectedError is a failure before the store: the write did not happen.
type InjectedError struct {
	Op  string
	Key leases.Key
	Msg string // e.g. "throttled", "connection refused"
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("sim: %s %s: %s (injected; not applied)", e.Op, e.Key, e.Msg)
}

// Is makes errors.Is(err, ErrInjected) true.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// ResponseLostError is a timeout after the write landed, or, with Late,
// while it is still on its way (Decision.Late): the caller cannot tell
// whether it did, or will. It matches os.ErrDeadlineExceeded and
// context.DeadlineExceeded, and has Timeout() true, like a client's read
// timeout.
type ResponseLostError struct {
	Op  string
	Key leases.Key
	// Late: no answer came, the request still in flight; it lands later.
	Late bool
}

func (e *ResponseLostError) Error() string {
	if e.Late {
		return fmt.Sprintf("sim: %s %s: i/o timeout (no answer; the request is still in flight and lands later)", e.Op, e.Key)
	}
	return fmt.Sprintf("sim: %s %s: i/o timeout (response lost after the write applied)", e.Op, e.Key)
}

// Timeout reports true.
func (e *ResponseLostError) Timeout() bool { return true }

// Is matches os.ErrDeadlineExceeded and context.DeadlineExceeded.
func (e *ResponseLostError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded || target == context.DeadlineExceeded
}
