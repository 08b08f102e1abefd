//go:build unix && !linux

package main

import "syscall"

// sysProcAttr puts an instance in its own process group; there is no
// parent-death signal here: the chaos run kills its instances on every exit
// path it controls.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
