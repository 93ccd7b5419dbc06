package gitexec

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Repo locates a repository explicitly. All paths are absolute realpaths, so
// a caller can check that each lies inside its sandbox before running git:
// a `.git` file or `commondir` may point anywhere on the host.
type Repo struct {
	// WorkTree is the top of the work tree ("" for a bare repository).
	WorkTree string
	// GitDir is the repository's git directory (for a linked worktree, its
	// private directory under the main repository's worktrees/).
	GitDir string
	// CommonDir is the directory holding config, objects and refs; equal to
	// GitDir except for linked worktrees.
	CommonDir string
}

// Options returns Options with GitDir and WorkTree set for r.
func (r Repo) Options() Options { return Options{GitDir: r.GitDir, WorkTree: r.WorkTree} }

// Within reports whether every directory of r is root or below it. root must
// be a clean absolute realpath.
func (r Repo) Within(root string) bool {
	for _, p := range []string{r.WorkTree, r.GitDir, r.CommonDir} {
		if p != "" && !within(root, p) {
			return false
		}
	}
	return true
}

func within(root, p string) bool {
	if p == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return len(p) > len(root) && p[len(root)] == filepath.Separator && p[:len(root)] == root
}

// maxGitFile bounds the size of a `.git` or `commondir` file we read.
const maxGitFile = 4096

// FindRepo finds the repository whose work tree contains dir, looking in dir
// and its parents but never above ceiling (dir must be ceiling or inside it).
// Only a `.git` directory or a `.git` file ("gitdir: <path>") marks a
// repository; a bare repository is never discovered. dir and ceiling must be
// absolute.
func FindRepo(dir, ceiling string) (Repo, error) {
	if !filepath.IsAbs(dir) || !filepath.IsAbs(ceiling) {
		return Repo{}, fmt.Errorf("finding repository: %w: paths must be absolute", ErrBadOption)
	}
	dir, ceiling = filepath.Clean(dir), filepath.Clean(ceiling)
	if !within(ceiling, dir) {
		return Repo{}, fmt.Errorf("finding repository: %w: directory is outside %s", ErrNoRepo, ceiling)
	}
	for d := dir; ; d = filepath.Dir(d) {
		r, found, err := repoAt(d)
		if err != nil {
			return Repo{}, fmt.Errorf("finding repository: %w", err)
		}
		if found {
			return r, nil
		}
		if d == ceiling || d == "/" {
			return Repo{}, fmt.Errorf("finding repository: %w", ErrNoRepo)
		}
	}
}

// repoAt reports the repository whose work tree top is d, if any.
func repoAt(d string) (Repo, bool, error) {
	dotgit := filepath.Join(d, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil {
		if os.IsNotExist(err) {
			return Repo{}, false, nil
		}
		return Repo{}, false, err
	}
	var gitDir string
	switch {
	case fi.IsDir():
		gitDir = dotgit
	case fi.Mode().IsRegular():
		target, err := readPointer(dotgit, "gitdir: ")
		if err != nil {
			return Repo{}, false, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(d, target)
		}
		gitDir = target
	default:
		// A symlinked .git is followed: the caller checks where it leads.
		gitDir = dotgit
	}
	work, err := filepath.EvalSymlinks(d)
	if err != nil {
		return Repo{}, false, err
	}
	if fi.IsDir() {
		// A real .git directory: its realpath is the work tree's plus
		// "/.git" (no second walk through the components).
		gitDir = filepath.Join(work, ".git")
	} else {
		gitDir, err = filepath.EvalSymlinks(gitDir)
		if err != nil {
			return Repo{}, false, fmt.Errorf("resolving git dir of %s: %w", d, err)
		}
		if gfi, err := os.Stat(gitDir); err != nil || !gfi.IsDir() {
			return Repo{}, false, fmt.Errorf("%w: %s/.git does not lead to a directory", ErrNoRepo, d)
		}
	}
	common := gitDir
	if _, err := os.Lstat(filepath.Join(gitDir, "commondir")); err == nil {
		c, err := readPointer(filepath.Join(gitDir, "commondir"), "")
		if err != nil {
			return Repo{}, false, err
		}
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		if common, err = filepath.EvalSymlinks(c); err != nil {
			return Repo{}, false, fmt.Errorf("resolving common dir of %s: %w", d, err)
		}
	}
	return Repo{WorkTree: work, GitDir: gitDir, CommonDir: common}, true, nil
}

// readPointer reads a small one-line file and returns its content after
// prefix, with surrounding whitespace removed.
func readPointer(name, prefix string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxGitFile+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > maxGitFile || bytes.IndexByte(b, 0) >= 0 {
		return "", fmt.Errorf("%w: %s is malformed", ErrNoRepo, name)
	}
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, prefix) || strings.ContainsAny(s, "\n\r") {
		return "", fmt.Errorf("%w: %s is malformed", ErrNoRepo, name)
	}
	s = strings.TrimSpace(s[len(prefix):])
	if s == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrNoRepo, name)
	}
	return s, nil
}
