package main

import (
	"os/exec"
	"syscall"
)

// dieWithHarness makes cmd's process get SIGKILL when the harness ends,
// however it ends (a SIGKILL of the harness too): its workers and the
// servers it runs as children do not outlive it. (PostgreSQL, which
// pg_ctl starts as a daemon, is not its child: a harness killed that way
// leaves it running in its temp directory.)
func dieWithHarness(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
