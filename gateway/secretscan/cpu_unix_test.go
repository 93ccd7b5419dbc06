//go:build unix

package secretscan

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process has used: on
// a shared machine, CPU time per operation is the stable figure (wall time
// includes waiting for a core).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
