//go:build unix

package policy

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// osFS is the real filesystem. Lstat goes straight to the system call so
// that a call allocates no FileInfo.
type osFS struct{}

func (osFS) Lstat(name string) (fs.FileMode, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(name, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		break
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		return fs.ModeSymlink, nil
	case syscall.S_IFDIR:
		return fs.ModeDir, nil
	case syscall.S_IFREG:
		return 0, nil
	}
	return fs.ModeIrregular, nil
}

func (osFS) Readlink(name string) (string, error) { return os.Readlink(name) }

func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
