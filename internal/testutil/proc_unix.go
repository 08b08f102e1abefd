//go:build unix && !linux

package testutil

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the emulator in its own process group. There is no
// Pdeathsig here: the emulators also exit when their stdin (a pipe held by
// the test binary) reaches EOF.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
