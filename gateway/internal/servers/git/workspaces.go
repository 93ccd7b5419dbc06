package git

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
)

// maxWorkspaceServers bounds the sessions' servers kept; past it the cache
// is dropped and servers are rebuilt on use.
const maxWorkspaceServers = 512

// errWorkspace is shown to the agent when its session's workspace cannot
// be served.
var errWorkspace = errors.New("the session's workspace is not available")

// workspaces serves the minted sessions' own sandboxes: one Server per
// workspace, whose sandbox is the workspace (every repository, worktree
// and clone target must lie in it) and whose push checker is built for it,
// as the policy engine's view for that sandbox is.
type workspaces struct {
	root string // realpath of Config.WorkspaceRoot
	mu   sync.Mutex
	m    map[string]*Server
}

// newWorkspaces checks Config.WorkspaceRoot ("" : none): neither it and
// the sandbox nor it and the mirror directory may contain each other.
func newWorkspaces(dir, sandbox, mirrorDir string) (*workspaces, error) {
	if dir == "" {
		return nil, nil
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("configuring git server: WorkspaceRoot %q must be an absolute path", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving git workspace root %q: %w", dir, err)
	}
	for _, other := range []string{sandbox, mirrorDir} {
		if within(real, other) || within(other, real) {
			return nil, fmt.Errorf("configuring git server: WorkspaceRoot %q and %q must not contain each other", dir, other)
		}
	}
	return &workspaces{root: real, m: map[string]*Server{}}, nil
}

// forWorkspace returns the server for the session workspace dir, which
// must be a directory (not a symlink) directly below the workspace root.
func (s *Server) forWorkspace(dir string) (*Server, error) {
	w := s.ws
	if w == nil {
		return nil, &toolError{msg: errWorkspace.Error(), err: errors.New("no workspace root is configured")}
	}
	rel, err := filepath.Rel(w.root, dir)
	if err != nil || !within(w.root, dir) || dir == w.root || strings.Contains(rel, "/") || filepath.Clean(dir) != dir {
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
	push, err := policy.NewPushChecker(dir, s.push.ProtectedBranches, s.push.Resolver)
	if err != nil {
		return nil, &toolError{msg: errWorkspace.Error(), err: err}
	}
	c := &Server{
		sandbox:       dir,
		mirrorDir:     s.mirrorDir, // mirrors are keyed by the repository's path, so per workspace
		creds:         s.creds,
		helperPath:    s.helperPath,
		push:          push,
		authorName:    s.authorName,
		authorMail:    s.authorMail,
		timeout:       s.timeout,
		netTimeout:    s.netTimeout,
		maxOutput:     s.maxOutput,
		maxScan:       s.maxScan,
		git:           s.git,
		log:           s.log.With("workspace", filepath.Base(dir)),
		unsafeLocal:   s.unsafeLocal,
		unsafeUnbound: s.unsafeUnbound,
		unsafeTestCA:  s.unsafeTestCA,
		mirrorLocks:   map[string]*sync.Mutex{},
	}
	c.tools = toolargs.NewSet(ServerName, c, toolDefs, c.fail)
	if len(w.m) >= maxWorkspaceServers {
		w.m = map[string]*Server{}
	}
	w.m[dir] = c
	return c, nil
}

// workspaceFor returns the session server whose workspace holds the
// canonical path p (ok false when p is not below the workspace root): the
// policy engine inspects a session's push by its repository's path, with
// no session in sight.
func (s *Server) workspaceFor(p string) (c *Server, ok bool, err error) {
	if s.ws == nil || !within(s.ws.root, p) {
		return nil, false, nil
	}
	rel, err := filepath.Rel(s.ws.root, p)
	if err != nil || rel == "." {
		return nil, true, &toolError{msg: errWorkspace.Error(), err: fmt.Errorf("%q names no workspace", p)}
	}
	first, _, _ := strings.Cut(rel, "/")
	c, err = s.forWorkspace(filepath.Join(s.ws.root, first))
	return c, true, err
}
