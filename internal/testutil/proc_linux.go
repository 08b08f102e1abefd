//go:build linux

package testutil

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the emulator in its own process group, so stopping it can
// kill everything it spawned, and asks the kernel to SIGKILL it when the test
// binary dies without cleaning up (a panic, -timeout, SIGKILL).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

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
