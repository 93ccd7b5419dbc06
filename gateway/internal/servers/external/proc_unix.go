//go:build unix

package external

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the child in its own process group, so that
// killProcessGroup also ends the processes it starts (npx, shells).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
