//go:build unix

package testutil

import (
	"os/exec"
	"syscall"
)

// killGroup SIGKILLs the emulator's whole process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}

// processGone reports whether no process has the given pid.
func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
