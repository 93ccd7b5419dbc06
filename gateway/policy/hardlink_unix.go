//go:build unix

package policy

import (
	"io/fs"
	"syscall"
)

// LstatID is Lstat with the identity of a regular file, from the same
// system call.
func (osFS) LstatID(name string) (fs.FileMode, fileID, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(name, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, fileID{}, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		break
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		return fs.ModeSymlink, fileID{}, nil
	case syscall.S_IFDIR:
		return fs.ModeDir, fileID{}, nil
	case syscall.S_IFREG:
		return 0, fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), nlink: uint64(st.Nlink)}, nil
	}
	return fs.ModeIrregular, fileID{}, nil
}

// statID returns the identity of a regular file's FileInfo.
func statID(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), nlink: uint64(st.Nlink)}, true
}
