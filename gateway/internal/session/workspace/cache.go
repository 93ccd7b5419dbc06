package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// MaxCached bounds the values a Cache keeps; past it the cache is dropped
// and values are rebuilt on use.
const MaxCached = 512

// Cache keeps one value per session workspace, built on first use: the
// tool servers (filesystem, git) serve a minted session with a server of
// their own confined to its workspace. It is safe for concurrent use.
type Cache[T any] struct {
	root  string
	build func(dir string, fi fs.FileInfo) (T, error)

	mu sync.Mutex
	m  map[string]T
}

// NewCache returns a cache of the workspaces below root (a realpath).
// build makes the value for the workspace dir, which has been checked to be
// a directory (fi, from lstat) directly below root.
func NewCache[T any](root string, build func(dir string, fi fs.FileInfo) (T, error)) *Cache[T] {
	return &Cache[T]{root: root, build: build, m: map[string]T{}}
}

// Root is the workspace root.
func (c *Cache[T]) Root() string { return c.root }

// Get returns the value for the workspace dir, which must be a clean path
// directly below the root naming a directory (not a symlink). Errors are
// details for the log, not for the agent.
func (c *Cache[T]) Get(dir string) (T, error) {
	var zero T
	if filepath.Clean(dir) != dir || dir == c.root || filepath.Dir(dir) != c.root {
		return zero, fmt.Errorf("workspace %q is not directly below %q", dir, c.root)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[dir]; ok {
		return v, nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return zero, err
	}
	if !fi.IsDir() {
		return zero, fmt.Errorf("workspace %q is not a directory (%v)", dir, fi.Mode().Type())
	}
	v, err := c.build(dir, fi)
	if err != nil {
		return zero, err
	}
	if len(c.m) >= MaxCached {
		c.m = map[string]T{}
	}
	c.m[dir] = v
	return v, nil
}

// Drain empties the cache and returns what it held (to close it).
func (c *Cache[T]) Drain() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]T, 0, len(c.m))
	for _, v := range c.m {
		out = append(out, v)
	}
	c.m = map[string]T{}
	return out
}
