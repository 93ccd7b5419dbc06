package filesystem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// maxWorkspaceServers bounds the sessions' servers kept open; past it the
// cache is dropped (their roots are closed when no call uses them any more).
const maxWorkspaceServers = 512

// errWorkspace is shown to the agent when its session's workspace cannot
// be served.
var errWorkspace = errors.New("the session's workspace is not available")

// workspaces serves the minted sessions' own sandboxes: one Server per
// workspace, with its own os.Root, sharing the parent's read-only
// directories and limits.
type workspaces struct {
	root string // realpath of Config.WorkspaceRoot
	mu   sync.Mutex
	m    map[string]*Server
}

// newWorkspaces checks Config.WorkspaceRoot ("" : none) against the
// sandbox's realpath sandbox: neither may contain the other.
func newWorkspaces(dir, sandbox string) (*workspaces, error) {
	if dir == "" {
		return nil, nil
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("configuring filesystem server: WorkspaceRoot %q is not absolute", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving filesystem workspace root %q: %w", dir, err)
	}
	if _, ok := within(real, sandbox); ok {
		return nil, fmt.Errorf("configuring filesystem server: WorkspaceRoot %q contains the sandbox", dir)
	}
	if _, ok := within(sandbox, real); ok {
		return nil, fmt.Errorf("configuring filesystem server: WorkspaceRoot %q is inside the sandbox", dir)
	}
	return &workspaces{root: real, m: map[string]*Server{}}, nil
}

// forWorkspace returns the server confined to the session workspace dir,
// which must be a directory (not a symlink) directly below the workspace
// root, named exactly as the policy engine names it.
func (s *Server) forWorkspace(dir string) (*Server, error) {
	w := s.ws
	if w == nil {
		return nil, &toolError{msg: errWorkspace.Error(), err: errors.New("no workspace root is configured")}
	}
	rel, ok := within(w.root, dir)
	if !ok || rel == "." || strings.ContainsRune(rel, filepath.Separator) || filepath.Clean(dir) != dir {
		return nil, &toolError{msg: errWorkspace.Error(), err: fmt.Errorf("workspace %q is not directly below %q", dir, w.root)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.m[dir]; c != nil {
		return c, nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, &toolError{msg: errWorkspace.Error(), err: err}
	}
	if !fi.IsDir() {
		return nil, &toolError{msg: errWorkspace.Error(), err: fmt.Errorf("workspace %q is not a directory (%v)", dir, fi.Mode().Type())}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, &toolError{msg: errWorkspace.Error(), err: err}
	}
	// The directory opened must be the one checked (not swapped since).
	st, err := root.Stat(".")
	if err != nil || !os.SameFile(st, fi) {
		root.Close()
		return nil, &toolError{msg: errWorkspace.Error(), err: fmt.Errorf("workspace %q changed while opening it", dir)}
	}
	c := &Server{
		root:     root,
		rootPath: dir,
		sb:       &area{root: root, path: dir},
		ro:       s.ro,
		maxRead:  s.maxRead,
		maxWrite: s.maxWrite,
		maxEnt:   s.maxEnt,
		log:      s.log.With("workspace", filepath.Base(dir)),
	}
	c.tools = toolargs.NewSet(ServerName, c, toolDefs, c.fail)
	if len(w.m) >= maxWorkspaceServers {
		w.m = map[string]*Server{} // dropped roots close when collected
	}
	w.m[dir] = c
	return c, nil
}

// closeAll closes the sessions' roots (at Close).
func (w *workspaces) closeAll() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	for _, c := range w.m {
		err = errors.Join(err, c.root.Close())
	}
	w.m = map[string]*Server{}
	return err
}
