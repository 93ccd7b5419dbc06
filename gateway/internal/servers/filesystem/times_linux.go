//go:build linux

package filesystem

import (
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// birthTime reads the creation time of an open file with statx, or returns
// the zero time when the file system does not record it.
func birthTime(f syscall.Conn) time.Time {
	rc, err := f.SyscallConn()
	if err != nil {
		return time.Time{}
	}
	var stx unix.Statx_t
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &stx)
	}); err != nil || serr != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}
	}
	return time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec))
}

// accessTime returns the last access time recorded in fi, if any.
func accessTime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Atim.Sec, st.Atim.Nsec)
	}
	return time.Time{}
}
