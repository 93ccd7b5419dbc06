//go:build unix

package netlimit

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the soft limit on open files (RLIMIT_NOFILE) to the hard limit and
// returns both as they are afterwards. A process that starts with the common soft limit of
// 1,024 otherwise refuses connections (accept4: too many open files) long before its
// listeners' caps.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	if r.Cur < r.Max {
		want := r
		want.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return r.Cur, r.Max, fmt.Errorf("raising RLIMIT_NOFILE from %d to %d: %w", r.Cur, r.Max, err)
		}
		r = want
	}
	return r.Cur, r.Max, nil
}
