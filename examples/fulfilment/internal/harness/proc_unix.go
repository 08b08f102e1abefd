//go:build unix

package harness

import "syscall"

// SignalsSupported says this platform has SIGSTOP, SIGCONT and process
// groups to send SIGINT to.
const SignalsSupported = true

// Kill SIGKILLs the instance's process group (also when it is stopped).
func (in *Instance) Kill() {
	if in.Cmd.Process != nil {
		_ = syscall.Kill(-in.Cmd.Process.Pid, syscall.SIGKILL)
		_ = in.Cmd.Process.Kill()
	}
}

// Stop SIGSTOPs the instance: it stays in memory, holds its sockets and runs
// nothing, like a process paused by a long GC, a VM migration or a debugger.
func (in *Instance) Stop() error { return syscall.Kill(-in.Cmd.Process.Pid, syscall.SIGSTOP) }

// Continue SIGCONTs a stopped instance.
func (in *Instance) Continue() error { return syscall.Kill(-in.Cmd.Process.Pid, syscall.SIGCONT) }

// Interrupt SIGINTs the instance: a graceful stop (drain, checkpoint,
// release).
func (in *Instance) Interrupt() error { return syscall.Kill(-in.Cmd.Process.Pid, syscall.SIGINT) }

// processGone reports whether no process has this pid.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
