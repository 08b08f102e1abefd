//go:build !unix

package testutil

import "os/exec"

// setProcAttr does nothing here; the emulators exit when their stdin (a pipe
// held by the test binary) reaches EOF.
func setProcAttr(*exec.Cmd) {}

// killGroup kills the emulator process.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// processGone cannot tell here, so it says no.
func processGone(int) bool { return false }
