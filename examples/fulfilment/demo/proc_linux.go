package main

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts an instance in its own process group (so that a Ctrl-C
// in the terminal reaches the demo, which then stops it) and has the kernel
// SIGKILL it if the demo dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup SIGKILLs the instance's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// processGone reports whether no process has this pid.
func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
