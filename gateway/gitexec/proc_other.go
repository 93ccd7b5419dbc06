//go:build !unix

package gitexec

import "os/exec"

func setProcessGroup(cmd *exec.Cmd) {}
