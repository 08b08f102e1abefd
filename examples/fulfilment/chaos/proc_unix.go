//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// signalsSupported says this platform has SIGSTOP and SIGCONT.
const signalsSupported = true

// killGroup SIGKILLs the instance's process group (also when it is stopped).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
}

// stopProcess SIGSTOPs the instance: it stays in memory, holds its sockets
// and runs nothing, like a process paused by a long GC, a VM migration or a
// debugger.
func stopProcess(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGSTOP) }

// continueProcess SIGCONTs a stopped instance.
func continueProcess(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT) }

// interruptProcess SIGINTs the instance: a graceful stop (drain, checkpoint,
// release).
func interruptProcess(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }

// processGone reports whether no process has this pid.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
