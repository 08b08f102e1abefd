//go:build !unix

package main

import (
	"errors"
	"os/exec"
	"syscall"
)

// signalsSupported: without SIGSTOP and SIGCONT there is no chaos run.
const signalsSupported = false

var errUnsupported = errors.New("chaos: needs SIGSTOP, SIGCONT and SIGINT (Linux or another Unix)")

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func stopProcess(*exec.Cmd) error      { return errUnsupported }
func continueProcess(*exec.Cmd) error  { return errUnsupported }
func interruptProcess(*exec.Cmd) error { return errUnsupported }
func processGone(int) bool             { return false }
