package filesystem

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// fileKind is the type a checked open insists on.
type fileKind uint8

const (
	wantRegular fileKind = iota
	wantDir
)

// errSymlink marks a leaf that is a symbolic link. The policy engine hands
// over realpaths, so a symlink here was created or swapped in afterwards.
var errSymlink = errors.New("path is a symbolic link")

// testHookAfterCheck, when set by a test, runs between the checks on a path
// and its use, to stage a deterministic check/use race.
var testHookAfterCheck func(rel string)

func afterCheck(rel string) {
	if testHookAfterCheck != nil {
		testHookAfterCheck(rel)
	}
}

// openChecked opens rel in the sandbox (see area.openChecked).
func (s *Server) openChecked(rel string, want fileKind) (*os.File, fs.FileInfo, error) {
	return s.sb.openChecked(rel, want)
}

// openChecked opens rel through the area's root and proves that the opened
// file is the one the path names now: an lstat through the root before the
// open must describe the same inode as an fstat of the opened descriptor,
// with the wanted type. Regular files are opened with O_NONBLOCK so that a
// FIFO swapped in cannot hang the gateway. The file is opened read-only,
// whatever the area. The caller closes the file.
func (a *area) openChecked(rel string, want fileKind) (*os.File, fs.FileInfo, error) {
	before, err := a.root.Lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	if err := checkKind(before, want); err != nil {
		return nil, nil, err
	}
	afterCheck(rel)
	flag := os.O_RDONLY | syscall.O_NOCTTY
	if want == wantDir {
		flag |= syscall.O_DIRECTORY
	} else {
		flag |= syscall.O_NONBLOCK
	}
	f, err := a.root.OpenFile(rel, flag, 0)
	if err != nil {
		return nil, nil, err
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("checking the file after opening it: %w", err)
	}
	if !os.SameFile(before, after) {
		f.Close()
		return nil, nil, fmt.Errorf("%w: inode differs after open", errChanged)
	}
	if err := checkKind(after, want); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, after, nil
}

// checkKind refuses symlinks and files of the wrong type.
func checkKind(fi fs.FileInfo, want fileKind) error {
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		return &toolError{msg: "access denied: path is a symbolic link", err: errSymlink}
	case want == wantDir && !m.IsDir():
		return &toolError{msg: "not a directory", err: syscall.ENOTDIR}
	case want == wantRegular && m.IsDir():
		return &toolError{msg: "is a directory", err: syscall.EISDIR}
	case want == wantRegular && !m.IsRegular():
		return &toolError{msg: "not a regular file"}
	}
	return nil
}

// linkCount returns the number of hard links of fi (1 when unknown).
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// writeAtomic replaces (or creates) the regular file rel with data.
//
// The bytes go to a fresh temporary file in the same directory, created with
// O_CREAT|O_EXCL through the root (never following anything), which is then
// renamed over rel. rename(2) replaces a symlink rather than following it, so
// even a leaf swapped for a symlink after the checks below cannot redirect
// the write outside the sandbox; a directory swapped for a symlink is refused
// by the root. An existing target must be a regular file with a single link:
// a hard link may share its inode with a file outside the sandbox, which
// os.Root cannot see, so writing "through" it is refused (replacing the name
// would be safe, but silently un-sharing a hard-linked file surprises the
// owner of the other name). Permissions of an existing file are kept.
func (s *Server) writeAtomic(rel string, data []byte) error {
	if rel == "." {
		return &toolError{msg: "is a directory"}
	}
	perm := fs.FileMode(0o644)
	cur, err := s.root.Lstat(rel)
	switch {
	case err == nil:
		if err := checkKind(cur, wantRegular); err != nil {
			return err
		}
		if n := linkCount(cur); n > 1 {
			return &toolError{
				msg: "refusing to write a file that has several hard links",
				err: fmt.Errorf("%s has %d links", rel, n),
			}
		}
		perm = cur.Mode().Perm()
	case isNotExist(err):
	default:
		return err
	}

	afterCheck(rel)
	tmp, err := tempName(rel)
	if err != nil {
		return err
	}
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOCTTY, 0o600)
	if err != nil {
		if isNotExist(err) {
			return failf("parent directory does not exist", err)
		}
		return err
	}
	cleanup := func() { _ = s.root.Remove(tmp) }
	if _, err := f.Write(data); err != nil {
		f.Close()
		cleanup()
		return fmt.Errorf("writing temporary file: %w", err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		cleanup()
		return fmt.Errorf("setting permissions: %w", err)
	}
	if err := f.Close(); err != nil {
		cleanup()
		return fmt.Errorf("closing temporary file: %w", err)
	}
	if err := s.root.Rename(tmp, rel); err != nil {
		cleanup()
		return err
	}
	return nil
}

// tempName returns a fresh hidden name next to rel.
func tempName(rel string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating temporary name: %w", err)
	}
	return path.Join(path.Dir(rel), ".ironcurtain-"+hex.EncodeToString(b[:])+".tmp"), nil
}
