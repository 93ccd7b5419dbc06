//go:build unix

package gitexec

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts git in its own process group so that a timeout also
// kills its children (ssh, remote helpers).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
