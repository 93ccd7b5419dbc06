//go:build unix

package gitexec

import (
	"fmt"
	"syscall"
)

// ReadRegularFile reads the file at path when it is a regular file of at
// most max bytes. A missing file (ENOENT, or ENOTDIR on the way) gives ok
// false and no error; a symbolic link, a directory, a device, a FIFO, a
// larger file, a file that changes size while it is read or any other
// failure gives an error (naming the file by its base name only). The file is opened without following a final
// symbolic link and without blocking (a FIFO swapped in cannot hang the
// reader), and checked after opening, so a swap between a check and the
// open cannot make it read something else. It uses the system calls
// directly: four per file (open, fstat, read, close) in the common case.
func ReadRegularFile(path string, max int64) (data []byte, ok bool, err error) {
	var fd int
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	switch err {
	case nil:
	case syscall.ENOENT, syscall.ENOTDIR:
		return nil, false, nil
	case syscall.ELOOP:
		return nil, false, fmt.Errorf("%s is a symbolic link", baseName(path))
	default:
		return nil, false, fmt.Errorf("opening %s: %w", baseName(path), err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, false, fmt.Errorf("inspecting %s: %w", baseName(path), err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, false, fmt.Errorf("%s is not a regular file", baseName(path))
	}
	if st.Size > max {
		return nil, false, fmt.Errorf("%s is larger than %d bytes", baseName(path), max)
	}
	// One byte more than fstat reported: a read that fills it means the
	// file grew (a concurrent writer); let git read it. A short read of a
	// regular file is the end of the file.
	buf := make([]byte, st.Size+1)
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading %s: %w", baseName(path), err)
		}
		want := len(buf) - n
		n += m
		if m < want {
			break
		}
	}
	if n != int(st.Size) {
		return nil, false, fmt.Errorf("%s changed while it was read", baseName(path))
	}
	return buf[:n], true, nil
}

// searchable is git's access(path, X_OK).
func searchable(path string) bool { return syscall.Access(path, 1) == nil }
