package filesystem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/internal/session/workspace"
)

// errWorkspace is shown to the agent when its session's workspace cannot
// be served.
var errWorkspace = errors.New("the session's workspace is not available")

// workspaces serves the minted sessions' own sandboxes: one Server per
// workspace, with its own os.Root, sharing the parent's read-only
// directories and limits. Past workspace.MaxCached servers the cache is
// dropped (their roots are closed when no call uses them any more).
type workspaces = workspace.Cache[*Server]

// newWorkspaces checks Config.WorkspaceRoot ("" : none) against the
// sandbox's realpath sandbox: neither may contain the other.
func (s *Server) newWorkspaces(dir, sandbox string) (*workspaces, error) {
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
	return workspace.NewCache(real, s.buildWorkspace), nil
}

// forWorkspace returns the server confined to the session workspace dir,
// which must be a directory (not a symlink) directly below the workspace
// root, named exactly as the policy engine names it.
func (s *Server) forWorkspace(dir string) (*Server, error) {
	if s.ws == nil {
		return nil, &toolError{msg: errWorkspace.Error(), err: errors.New("no workspace root is configured")}
	}
	c, err := s.ws.Get(dir)
	if err != nil {
		return nil, &toolError{msg: errWorkspace.Error(), err: err}
	}
	return c, nil
}

// buildWorkspace opens the server of the workspace dir (fi: its lstat).
func (s *Server) buildWorkspace(dir string, fi fs.FileInfo) (*Server, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	// The directory opened must be the one checked (not swapped since).
	st, err := root.Stat(".")
	if err != nil || !os.SameFile(st, fi) {
		root.Close()
		return nil, fmt.Errorf("workspace %q changed while opening it", dir)
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
	return c, nil
}

// closeWorkspaces closes the sessions' roots (at Close).
func closeWorkspaces(w *workspaces) error {
	if w == nil {
		return nil
	}
	var err error
	for _, c := range w.Drain() {
		err = errors.Join(err, c.root.Close())
	}
	return err
}
