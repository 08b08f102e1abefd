//go:build linux

package main

import "syscall"

// sysProcAttr puts an instance in its own process group (a Ctrl-C in the
// terminal reaches the chaos run, which then stops it; signals go to the
// group) and has the kernel SIGKILL it if the chaos run dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
