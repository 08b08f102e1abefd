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
