package filesystem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// area is a directory tree the server serves through an os.Root: the
// sandbox (read and write) or one of the read-only directories
// (Config.ReadOnlyDirs), which only the read tools reach. Every open in an
// area goes through its root, so symlinks and ".." cannot leave it.
type area struct {
	root     *os.Root
	path     string // realpath
	readOnly bool
}

// loc is a checked path: an area and a path relative to its root.
type loc struct {
	a   *area
	rel string
}

// display returns the absolute path the agent uses.
func (l loc) display() string {
	if l.rel == "." || l.rel == "" {
		return l.a.path
	}
	return filepath.Join(l.a.path, filepath.FromSlash(l.rel))
}

// openReadOnlyDirs opens each read-only directory (realpath, a directory,
// not overlapping the sandbox or another one).
func openReadOnlyDirs(sandbox string, dirs []string) ([]*area, error) {
	var out []*area
	closeAll := func() {
		for _, a := range out {
			a.root.Close()
		}
	}
	for i, d := range dirs {
		if !filepath.IsAbs(d) {
			closeAll()
			return nil, fmt.Errorf("configuring filesystem server: ReadOnlyDirs[%d] %q is not absolute", i, d)
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("resolving read-only directory %q: %w", d, err)
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			closeAll()
			return nil, fmt.Errorf("configuring filesystem server: read-only directory %q is not a directory", d)
		}
		overlaps := func(a, b string) bool {
			_, in := within(a, b)
			_, out := within(b, a)
			return in || out
		}
		if real == "/" || overlaps(real, sandbox) {
			closeAll()
			return nil, fmt.Errorf("configuring filesystem server: read-only directory %q overlaps the sandbox", d)
		}
		for _, a := range out {
			if overlaps(real, a.path) {
				closeAll()
				return nil, fmt.Errorf("configuring filesystem server: read-only directories %q and %q overlap", a.path, d)
			}
		}
		root, err := os.OpenRoot(real)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("opening read-only directory %q: %w", d, err)
		}
		out = append(out, &area{root: root, path: real, readOnly: true})
	}
	return out, nil
}

// resolveRead checks a transport path for a read tool: inside the sandbox
// or inside a read-only directory (checked like resolve: raw string
// absolute, clean, no control characters, containment by path segment).
func (s *Server) resolveRead(p string) (loc, error) {
	rel, err := s.resolve(p)
	if err == nil {
		return loc{a: s.sb, rel: rel}, nil
	}
	if len(s.ro) == 0 || !isOutside(err) {
		return loc{}, err
	}
	for _, a := range s.ro {
		if rel, ok := within(a.path, p); ok {
			return loc{a: a, rel: rel}, nil
		}
	}
	return loc{}, &toolError{msg: "access denied: path is outside the sandbox and the read-only directories", err: fmt.Errorf("%w: %q", errOutside, p)}
}

// readOnlyRefusal is resolve's answer for a write to a read-only directory.
func (s *Server) readOnlyRefusal(p string) error {
	for _, a := range s.ro {
		if _, ok := within(a.path, p); ok {
			return &toolError{msg: "access denied: the path is in a read-only directory", err: fmt.Errorf("%w: %q in read-only %q", errOutside, p, a.path)}
		}
	}
	return nil
}

// isOutside reports a refusal for a path outside the sandbox.
func isOutside(err error) bool { return errors.Is(err, errOutside) }
