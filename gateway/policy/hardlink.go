package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// RuleHardLinkWrite names the refusal to write through a regular file that
// has more than one link.
const RuleHardLinkWrite = "structural-hard-link-write"

// maxProtectedWalk bounds the entries looked at under the protected paths
// when a call's path has several links. Past it the call is refused: the
// protected files cannot all be compared.
const maxProtectedWalk = 10000

var errProtectedWalk = errors.New("too many files under the protected paths to compare inodes")

// fileID identifies a regular file (device and inode) and counts its links.
// The zero value means "not an existing regular file, or unknown".
type fileID struct{ dev, ino, nlink uint64 }

type inode struct{ dev, ino uint64 }

func (f fileID) inode() inode { return inode{f.dev, f.ino} }

// idFS is a FileSystem that also reports which file a name is. The
// canonicaliser uses it for every component, so that the identity of the
// final file costs no extra system call.
type idFS interface {
	LstatID(name string) (fs.FileMode, fileID, error)
}

// lstat is c.fs.Lstat, with the file's identity when the file system can
// tell it (a zero fileID otherwise, and for anything but a regular file).
func (c *pathCanon) lstat(name string) (fs.FileMode, fileID, error) {
	if f, ok := c.fs.(idFS); ok {
		return f.LstatID(name)
	}
	m, err := c.fs.Lstat(name)
	return m, fileID{}, err
}

// checkHardLinks refuses a path value that names a regular file with more
// than one link when
//   - its inode is the inode of a file under a protected path (read or
//     write: the name in the sandbox is only another door to that file), or
//   - the argument writes (write-path): the other names may be .git/config
//     or .env of some repository, which cannot be found without walking
//     the sandbox, and the filesystem server refuses such writes too.
//
// The protected files' inodes are listed when a call needs them, never
// cached: a spool segment or a policy file re-created after load has a new
// inode, and a call that names no multiply-linked file pays nothing.
func (c *call) checkHardLinks() (Evaluation, bool) {
	if !c.multiLink {
		return Evaluation{}, false
	}
	var protected map[inode]bool
	var walkErr error
	listed := false
	for i := range c.vals {
		if c.rr.kind[i]&argPath == 0 {
			continue
		}
		name := c.t.ann.Args[i].Name
		for _, p := range c.vals[i].canon {
			id := c.leafID(p)
			if id.nlink <= 1 {
				continue
			}
			if !listed {
				protected, walkErr = c.e.protectedInodes()
				listed = true
			}
			if walkErr != nil {
				return c.deny(RuleProtectedPath, fmt.Sprintf("argument %q names a file with several hard links, and the protected files could not be compared with it", name),
					walkErr.Error())
			}
			if protected[id.inode()] {
				return c.deny(RuleProtectedPath, fmt.Sprintf("argument %q names a hard link to a protected file", name), "hard link: "+p)
			}
			if c.rr.perArg[i].has(RoleWritePath) {
				return c.deny(RuleHardLinkWrite, fmt.Sprintf("argument %q names a file with %d hard links: writing through it would change the file under its other names, which may be protected", name, id.nlink),
					"hard link: "+p)
			}
		}
	}
	return Evaluation{}, false
}

// leafID returns the identity recorded for the canonical path p in this
// call.
func (c *call) leafID(p string) fileID {
	for _, pp := range c.cache {
		if pp.canon == p {
			return pp.id
		}
	}
	return fileID{}
}

// protectedInodes lists the inodes of the regular files at or under the
// protected paths, not following symlinks (a symlink's target is protected
// on its own path, or not at all). A protected directory that contains the
// sandbox is walked without the sandbox, which it does not protect
// (checkProtected). Missing paths are skipped; any other error, or more than
// maxProtectedWalk entries, is returned.
func (e *Engine) protectedInodes() (map[inode]bool, error) {
	out := map[inode]bool{}
	budget := maxProtectedWalk
	sb := e.canon.sandbox
	var walk func(p string) error
	walk = func(p string) error {
		if budget--; budget < 0 {
			return errProtectedWalk
		}
		if sb != "" && p == sb {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			if isMissing(err) {
				return nil
			}
			return fmt.Errorf("listing protected files: %w", err)
		}
		switch {
		case fi.Mode().IsRegular():
			if id, ok := statID(fi); ok {
				out[id.inode()] = true
			}
		case fi.IsDir():
			entries, err := os.ReadDir(p)
			if err != nil {
				return fmt.Errorf("listing protected files: %w", err)
			}
			for _, d := range entries {
				if err := walk(filepath.Join(p, d.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, pp := range e.protect {
		if err := walk(pp); err != nil {
			return nil, err
		}
	}
	return out, nil
}
