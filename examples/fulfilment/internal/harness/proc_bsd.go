//go:build unix && !linux

package harness

import "syscall"

// sysProcAttr puts an instance in its own process group; there is no
// parent-death signal here: the command kills its instances on every exit
// path it controls.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
