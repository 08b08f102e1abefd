//go:build !unix

package harness

import (
	"errors"
	"syscall"
)

// SignalsSupported: without SIGSTOP, SIGCONT and SIGINT there is no chaos
// run, and a graceful stop of an instance is not possible.
const SignalsSupported = false

var errUnsupported = errors.New("needs SIGSTOP, SIGCONT and SIGINT (Linux or another Unix)")

// sysProcAttr: an instance stays in the command's process group and has no
// parent-death signal; the command kills it on every exit path it controls.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// Kill SIGKILLs the instance.
func (in *Instance) Kill() {
	if in.Cmd.Process != nil {
		_ = in.Cmd.Process.Kill()
	}
}

func (in *Instance) Stop() error      { return errUnsupported }
func (in *Instance) Continue() error  { return errUnsupported }
func (in *Instance) Interrupt() error { return errUnsupported }

// processGone: unknown here; stale directories are kept.
func processGone(int) bool { return false }
