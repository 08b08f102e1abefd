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
