// Package workspace gives each minted agent session its own sandbox
// directory, <root>/<session id>, below the configured root
// (gateway.yaml: session_workspaces.root). The directory is created when
// the session is minted and removed when it is revoked or has expired,
// unless the deployment keeps workspaces (session_workspaces.keep). The
// static agent tokens keep the configured sandbox.
//
// Every operation goes through an os.Root opened on the root, so a symlink
// an agent planted in its workspace (or swapped in for one) can never make
// the gateway create or remove anything outside the root.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Modes of the root and of a session's directory: the root can be
// traversed but not listed by others (an agent container mounts only its
// own directory); a session's directory is readable by the agent's user,
// which mounts it read-only, and written only by the gateway's tools.
const (
	RootMode = 0o711
	DirMode  = 0o755
)

// MaxIDLen bounds a workspace name.
const MaxIDLen = 128

// ErrInvalidID is returned for a session id that cannot name a directory.
var ErrInvalidID = errors.New("invalid session id for a workspace")

// Manager creates and removes per-session workspaces. It is safe for
// concurrent use.
type Manager struct {
	root *os.Root
	path string // realpath of the root
	keep bool
}

// Open opens (creating it with RootMode if missing) the workspace root dir,
// which must be absolute. keep leaves a session's directory in place when
// the session ends.
func Open(dir string, keep bool) (*Manager, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) == "/" {
		return nil, fmt.Errorf("opening session workspaces: root %q must be an absolute path other than /", dir)
	}
	if err := os.MkdirAll(dir, RootMode); err != nil {
		return nil, fmt.Errorf("creating session workspace root: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving session workspace root: %w", err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("opening session workspace root: %w", err)
	}
	return &Manager{root: root, path: real, keep: keep}, nil
}

// Close releases the root.
func (m *Manager) Close() error { return m.root.Close() }

// Root returns the realpath of the root.
func (m *Manager) Root() string { return m.path }

// Keep reports whether ended sessions' directories are kept.
func (m *Manager) Keep() bool { return m.keep }

// checkID accepts names of one path component made of letters, digits,
// '_' and '-' (minted ids are sess_ and base32).
func checkID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: length %d", ErrInvalidID, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: byte %#x at %d", ErrInvalidID, c, i)
		}
	}
	return nil
}

// Path returns the directory of session id (it may not exist).
func (m *Manager) Path(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	return m.path + "/" + id, nil
}

// Create makes session id's directory (DirMode, owned by the gateway's
// user, which writes it through its tools) and returns its path. The
// directory must not exist yet: ids are fresh, and a name that exists
// already (left over, or planted) is not reused.
func (m *Manager) Create(id string) (string, error) {
	p, err := m.Path(id)
	if err != nil {
		return "", err
	}
	if err := m.root.Mkdir(id, DirMode); err != nil {
		return "", fmt.Errorf("creating the workspace of session %s: %w", id, err)
	}
	if err := m.root.Chmod(id, DirMode); err != nil { // the umask may have narrowed it
		return "", fmt.Errorf("creating the workspace of session %s: %w", id, err)
	}
	return p, nil
}

// Release ends session id's workspace: removed, unless the manager keeps
// workspaces. A missing directory is not an error.
func (m *Manager) Release(id string) error {
	if m.keep {
		return nil
	}
	return m.Discard(id)
}

// Discard removes session id's workspace whatever the keep setting (for a
// session whose minting failed). Symlinks inside are removed, never
// followed.
func (m *Manager) Discard(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := m.root.RemoveAll(id); err != nil {
		return fmt.Errorf("removing the workspace of session %s: %w", id, err)
	}
	return nil
}

// List returns the names of the directories in the root, sorted; other
// entries are ignored.
func (m *Manager) List() ([]string, error) {
	f, err := m.root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("listing session workspaces: %w", err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("listing session workspaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.Type()&fs.ModeType == fs.ModeDir && checkID(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Sweep releases the workspaces whose session is not active any more:
// active reports, of the ids listed, those still active (an error stops
// the sweep and removes nothing). It returns the ids released. With keep
// set nothing is removed.
func (m *Manager) Sweep(active func(ids []string) (map[string]bool, error)) ([]string, error) {
	if m.keep {
		return nil, nil
	}
	ids, err := m.List()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	live, err := active(ids)
	if err != nil {
		return nil, fmt.Errorf("sweeping session workspaces: %w", err)
	}
	var done []string
	var errs []error
	for _, id := range ids {
		if live[id] {
			continue
		}
		if err := m.Discard(id); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, id)
	}
	return done, errors.Join(errs...)
}
