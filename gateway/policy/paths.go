package policy

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Path canonicalisation limits.
const (
	maxPathLen    = 4096
	maxSymlinkHop = 40
)

var (
	errPathControl       = errors.New("path contains a NUL or control character")
	errPathTooLong       = errors.New("path is too long")
	errPathRelative      = errors.New("relative path without a sandbox")
	errPathNoHome        = errors.New("path starts with ~ but no home directory is set")
	errPathLoop          = errors.New("too many levels of symbolic links")
	errPathMissingParent = errors.New("path climbs (..) out of a directory that does not exist or is not a directory")
)

// FileSystem is what the engine reads of the file system: the path
// canonicaliser resolves symbolic links component by component with it.
// LoadDir and New use the operating system's (WithFileSystem replaces it;
// tests swap in a counting one), LoadDirRecorded one on which nothing
// exists. Only the operating system's also reports hard links (the
// structural-hard-link-write and hard-link protected-path checks).
type FileSystem interface {
	// Lstat returns the mode of name without following a final symlink.
	Lstat(name string) (fs.FileMode, error)
	// Readlink returns the target of the symlink name.
	Readlink(name string) (string, error)
}

// isMissing reports whether err means the path (or a parent) does not exist
// as a directory: the rest of the path is then taken lexically.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || isNotDir(err)
}

// checkRawPath rejects what a later filepath.Join or the kernel could read
// differently from the policy: NUL and other control characters (C0, DEL,
// C1) anywhere in the raw input, and absurd lengths.
func checkRawPath(raw string) error {
	if len(raw) > maxPathLen {
		return errPathTooLong
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c < 0x20 || c == 0x7f {
			return errPathControl
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(raw[i:])
			if r >= 0x80 && r <= 0x9f {
				return errPathControl
			}
			i += size - 1
		}
	}
	return nil
}

// pathCanon canonicalises paths for one engine. sandbox is the sandbox's
// realpath ("" when there is none), sandboxLex its configured absolute form.
type pathCanon struct {
	home       string
	sandbox    string
	sandboxLex string
	// alias, in a session's view (sessions.go), is the configured sandbox's
	// absolute form: the agent names its own sandbox by it, so a raw path
	// under alias means the same path under sandbox.
	alias string
	fs    FileSystem
}

// canonical returns the symlink-free absolute path that raw names: ~ and ~/
// expand from home, relative paths resolve against the sandbox (never the
// process's working directory), symlinks are followed component by
// component (so "link/.." means the parent of the link's target, as the
// kernel reads it), and from the first component that does not exist the
// rest is applied lexically.
func (c *pathCanon) canonical(raw string) (string, error) {
	p, _, err := c.canonicalID(raw)
	return p, err
}

// canonicalID is canonical, and also returns the identity of the file the
// result names when it is an existing regular file (zero otherwise).
func (c *pathCanon) canonicalID(raw string) (string, fileID, error) {
	if err := checkRawPath(raw); err != nil {
		return "", fileID{}, err
	}
	p := raw
	if p == "~" || strings.HasPrefix(p, "~/") {
		if c.home == "" {
			return "", fileID{}, errPathNoHome
		}
		p = c.home + p[1:]
	}
	if !strings.HasPrefix(p, "/") {
		if c.sandbox == "" {
			return "", fileID{}, errPathRelative
		}
		return c.walk(c.sandbox, p)
	}
	if c.sandbox != "" {
		// The sandbox and its ancestors were resolved at load; only the
		// components below it are looked at.
		if rest, ok := under(p, c.alias); ok {
			return c.walk(c.sandbox, rest)
		}
		if rest, ok := under(p, c.sandboxLex); ok {
			return c.walk(c.sandbox, rest)
		}
		if rest, ok := under(p, c.sandbox); ok {
			return c.walk(c.sandbox, rest)
		}
	}
	return c.walk("/", p)
}

// under reports whether p is root or below it (component-wise) and returns
// the remainder.
func under(p, root string) (string, bool) {
	if root == "" || root == "/" {
		return "", false
	}
	if p == root {
		return "", true
	}
	if len(p) > len(root) && p[len(root)] == '/' && p[:len(root)] == root {
		return p[len(root)+1:], true
	}
	return "", false
}

// walk resolves rest (relative components) starting from the already
// canonical directory resolved. Once a component does not exist (or is not
// a directory) the remaining components are appended lexically; a ".."
// after that point is refused, as the kernel would refuse it: resolving it
// lexically could land on an existing symlink that was never followed.
// It also returns the identity of the last component when that is an
// existing regular file.
func (c *pathCanon) walk(resolved, rest string) (string, fileID, error) {
	hops := 0
	missing := false // resolved does not exist or is not a directory
	var leaf fileID  // identity of resolved when it is a regular file
	for rest != "" {
		var comp string
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			comp, rest = rest[:i], rest[i+1:]
		} else {
			comp, rest = rest, ""
		}
		switch comp {
		case "", ".":
			continue
		case "..":
			if missing {
				return "", fileID{}, errPathMissingParent
			}
			resolved, leaf = parent(resolved), fileID{}
			continue
		}
		next := join(resolved, comp)
		leaf = fileID{}
		if missing {
			resolved = next
			continue
		}
		mode, id, err := c.lstat(next)
		if err != nil {
			if !isMissing(err) {
				return "", fileID{}, err
			}
			missing = true
			resolved = next
			continue
		}
		if mode&fs.ModeSymlink == 0 {
			resolved, leaf = next, id
			missing = !mode.IsDir()
			continue
		}
		hops++
		if hops > maxSymlinkHop {
			return "", fileID{}, errPathLoop
		}
		target, err := c.fs.Readlink(next)
		if err != nil {
			return "", fileID{}, err
		}
		if len(target)+len(rest) > maxPathLen {
			return "", fileID{}, errPathTooLong
		}
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		if rest == "" {
			rest = target
		} else {
			rest = target + "/" + rest
		}
	}
	return resolved, leaf, nil
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// within reports whether p is root or below it. Both must be canonical.
// This is the only containment test: never a bare string prefix.
func within(p, root string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || (len(p) > len(root) && p[len(root)] == '/' && p[:len(root)] == root)
}

// cleanAbs makes an absolute lexical path (for settings), expanding ~.
func cleanAbs(p, home string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" {
			return "", errPathNoHome
		}
		p = home + p[1:]
	}
	if !filepath.IsAbs(p) {
		return "", errors.New("must be an absolute path or start with ~")
	}
	return filepath.Clean(p), nil
}
