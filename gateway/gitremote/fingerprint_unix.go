//go:build unix

package gitremote

import (
	"errors"
	"syscall"
)

// fingerprint identifies one version of a file for the resolver cache.
type fingerprint struct {
	exists   bool
	dev, ino uint64
	size     int64
	mtime    int64
	ctime    int64
	mode     uint32
}

// statFingerprint lstats name: a file swapped for a symlink changes inode.
func statFingerprint(name string) (fingerprint, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(name, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			return fingerprint{}, true
		}
		return fingerprint{}, false
	}
	return fingerprint{exists: true, dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size,
		mtime: mtimeNano(&st), ctime: ctimeNano(&st), mode: uint32(st.Mode)}, true
}

// racy reports whether the file changed at or after limit (unix ns).
func (f fingerprint) racy(limit int64) bool {
	return f.exists && (f.mtime >= limit || f.ctime >= limit)
}

func (f fingerprint) symlink() bool { return f.exists && f.mode&syscall.S_IFMT == syscall.S_IFLNK }
