package policy

import (
	"io/fs"
)

// LoadDirRecorded is LoadDir for re-evaluating recorded calls (`policy
// replay`): the engine sees a file system on which nothing exists, so every
// path is taken lexically. Recorded arguments are the canonical ones the
// gateway judged (symlinks already resolved, ~ expanded, named remotes
// replaced by their URLs), so the lexical reading reproduces them without
// today's file system, but nothing that depended on the state of a file is
// seen again: symlinks created since, hard links (never seen: a write
// through a multiply-linked file is not refused), and anything git reads
// from a repository (a push's refs, a default remote) cannot be resolved.
// Callers must report such calls as state-dependent rather than trust the
// new decision.
func LoadDirRecorded(dir string, s Settings, opts ...Option) (*Engine, error) {
	env := newEnv(osFS{}, opts)
	env.fs = absentFS{}
	return loadDirEnv(dir, s, env)
}

// absentFS is a file system on which nothing exists.
type absentFS struct{}

func (absentFS) Lstat(name string) (fs.FileMode, error) {
	return 0, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
}

func (absentFS) Readlink(name string) (string, error) {
	return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrNotExist}
}
