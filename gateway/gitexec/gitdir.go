package gitexec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrUnsafeGitDir is returned by CheckGitDir when a repository's git
// directory could make git read files outside it.
var ErrUnsafeGitDir = errors.New("unsafe git directory")

// MaxGitDirEntries bounds the entries CheckGitDir inspects; a larger git
// directory is refused rather than partly checked.
const MaxGitDirEntries = 200_000

// CheckGitDir walks the git directories of r (GitDir and CommonDir) and
// refuses, with an error wrapping ErrUnsafeGitDir, any entry that would make
// git open a file the agent chose outside the repository, or block:
//
//   - a symbolic link anywhere in them (git follows links for loose objects,
//     packs, refs, packed-refs, config, HEAD, index, info/*: a link resolved
//     in the gateway's file system could reach another session's mirror or a
//     secret file, and git quotes malformed files in its error messages);
//   - objects/info/alternates or objects/info/http-alternates (borrowed
//     object stores anywhere on the host);
//   - FIFOs, sockets and device files (a FIFO as the index hangs git).
//
// The walk reads directory entries only (no stat per file). The error names
// the offending entry relative to the git directory.
func CheckGitDir(r Repo) error {
	tops := map[string]bool{r.CommonDir: true, r.GitDir: true}
	walked := map[string]bool{}
	count := 0
	for _, dir := range []string{r.CommonDir, r.GitDir} {
		if dir == "" || walked[dir] {
			continue
		}
		walked[dir] = true
		if err := checkTree(dir, tops, &count); err != nil {
			if errors.Is(err, ErrUnsafeGitDir) {
				return err
			}
			return fmt.Errorf("checking git directory: %w", err)
		}
	}
	return nil
}

// checkEntry applies CheckGitDir's rules to one entry of type t (the
// fs.ModeType bits) at rel below the walked directory; path is its full
// path (for the alternates size check).
func checkEntry(path, rel string, t fs.FileMode, count *int) error {
	*count++
	if *count > MaxGitDirEntries {
		return fmt.Errorf("%w: more than %d entries to verify", ErrUnsafeGitDir, MaxGitDirEntries)
	}
	switch {
	case t&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link", ErrUnsafeGitDir, rel)
	case t&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0:
		return fmt.Errorf("%w: %s is not a regular file or directory", ErrUnsafeGitDir, rel)
	}
	if name := filepath.ToSlash(rel); name == "objects/info/alternates" || name == "objects/info/http-alternates" {
		if fi, err := os.Lstat(path); err == nil && fi.Size() > 0 {
			return fmt.Errorf("%w: %s borrows objects from another repository", ErrUnsafeGitDir, name)
		}
	}
	return nil
}

// walkTree is the portable checkTree: filepath.WalkDir (which reads
// directory entries only, no stat per file).
func walkTree(dir string, tops map[string]bool, count *int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if err := checkEntry(p, rel, d.Type(), count); err != nil {
			return err
		}
		if d.IsDir() && p != dir && tops[p] {
			// A linked worktree's private directory inside the common
			// directory: walked once.
			return fs.SkipDir
		}
		return nil
	})
}
