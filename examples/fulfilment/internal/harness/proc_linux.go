//go:build linux

package harness

import "syscall"

// sysProcAttr puts an instance in its own process group (a Ctrl-C in the
// terminal reaches the command, which then stops it; signals go to the
// group) and has the kernel SIGKILL it if the command dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
