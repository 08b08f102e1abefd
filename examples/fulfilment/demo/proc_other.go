//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// sysProcAttr: outside Linux an instance stays in the demo's process group
// and has no parent-death signal; the demo kills it on every exit path it
// controls.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup SIGKILLs the instance.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// processGone: unknown outside Linux; stale directories are kept.
func processGone(int) bool { return false }
