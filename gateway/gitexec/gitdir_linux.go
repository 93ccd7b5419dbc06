package gitexec

import (
	"encoding/binary"
	"io/fs"
	"path/filepath"
	"syscall"
)

// checkTree walks dir with the system calls directly (open relative to the
// parent without following links, getdents, close: four calls per
// directory, no stat per entry, no sorting), checking each entry with
// checkEntry. Entries whose type the file system does not report are
// lstat'ed. The walk order is the directory's own.
func checkTree(dir string, tops map[string]bool, count *int) error {
	fd, err := openDir(atFDCWD, dir)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := checkEntry(dir, ".", fs.ModeDir, count); err != nil {
		syscall.Close(fd)
		return err
	}
	w := treeWalker{root: dir, tops: tops, count: count, buf: make([]byte, 8192)}
	return w.walk(fd, dir, "")
}

// atFDCWD is AT_FDCWD (not exported by package syscall on every Linux
// architecture).
const atFDCWD = -0x64

type treeWalker struct {
	root  string
	tops  map[string]bool
	count *int
	buf   []byte
}

func openDir(at int, name string) (int, error) {
	for {
		fd, err := syscall.Openat(at, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// walk checks the entries of the open directory fd (at path, rel below the
// root; "" for the root) and recurses into its subdirectories. It closes fd.
func (w *treeWalker) walk(fd int, path, rel string) error {
	var subdirs []string
	for {
		n, err := syscall.Getdents(fd, w.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			syscall.Close(fd)
			return &fs.PathError{Op: "readdirent", Path: path, Err: err}
		}
		if n <= 0 {
			break
		}
		for off := 0; off < n; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(w.buf[off+16:]))
			if reclen < 20 || off+reclen > n {
				syscall.Close(fd)
				return &fs.PathError{Op: "readdirent", Path: path, Err: syscall.EIO}
			}
			typ := w.buf[off+18]
			nameb := w.buf[off+19 : off+reclen]
			for i, c := range nameb {
				if c == 0 {
					nameb = nameb[:i]
					break
				}
			}
			off += reclen
			if string(nameb) == "." || string(nameb) == ".." {
				continue
			}
			name := string(nameb)
			child, childRel := path+"/"+name, name
			if rel != "" {
				childRel = rel + "/" + name
			}
			mode, err := direntMode(typ, child)
			if err != nil {
				syscall.Close(fd)
				return err
			}
			if err := checkEntry(child, childRel, mode, w.count); err != nil {
				syscall.Close(fd)
				return err
			}
			if mode.IsDir() && !w.tops[child] {
				subdirs = append(subdirs, name)
			}
		}
	}
	for _, name := range subdirs {
		child := path + "/" + name
		cfd, err := openDir(fd, name)
		if err != nil {
			syscall.Close(fd)
			return &fs.PathError{Op: "open", Path: child, Err: err}
		}
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		if err := w.walk(cfd, child, childRel); err != nil {
			syscall.Close(fd)
			return err
		}
	}
	return syscall.Close(fd)
}

// direntMode maps a dirent type to fs.FileMode type bits, asking lstat
// when the file system does not say.
func direntMode(typ byte, path string) (fs.FileMode, error) {
	switch typ {
	case syscall.DT_REG:
		return 0, nil
	case syscall.DT_DIR:
		return fs.ModeDir, nil
	case syscall.DT_LNK:
		return fs.ModeSymlink, nil
	case syscall.DT_FIFO:
		return fs.ModeNamedPipe, nil
	case syscall.DT_SOCK:
		return fs.ModeSocket, nil
	case syscall.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, nil
	case syscall.DT_BLK:
		return fs.ModeDevice, nil
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, &fs.PathError{Op: "lstat", Path: filepath.Clean(path), Err: err}
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return 0, nil
	case syscall.S_IFDIR:
		return fs.ModeDir, nil
	case syscall.S_IFLNK:
		return fs.ModeSymlink, nil
	}
	return fs.ModeIrregular, nil
}
