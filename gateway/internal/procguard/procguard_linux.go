//go:build linux

package procguard

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func nonDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	d, err := dumpable()
	if err != nil {
		return err
	}
	if d {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0) left the process dumpable")
	}
	return nil
}

func dumpable() (bool, error) {
	// PR_GET_DUMPABLE returns the flag as the call's result, not through an argument.
	r, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_DUMPABLE, 0, 0, 0, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("prctl(PR_GET_DUMPABLE): %w", errno)
	}
	return r != 0, nil
}
