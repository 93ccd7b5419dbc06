package git

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/internal/session/workspace"
	"ironcurtain.dev/gateway/policy"
)

// errWorkspace is shown to the agent when its session's workspace cannot
// be served.
var errWorkspace = errors.New("the session's workspace is not available")

// workspaces serves the minted sessions' own sandboxes: one Server per
// workspace, whose sandbox is the workspace (every repository, worktree
// and clone target must lie in it) and whose push checker is built for it,
// as the policy engine's view for that sandbox is. Past
// workspace.MaxCached servers the cache is dropped and servers are rebuilt
// on use.
type workspaces = workspace.Cache[*Server]

// newWorkspaces checks Config.WorkspaceRoot ("" : none): neither it and
// the sandbox nor it and the mirror directory may contain each other.
func (s *Server) newWorkspaces(dir, sandbox, mirrorDir string) (*workspaces, error) {
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
	return workspace.NewCache(real, s.buildWorkspace), nil
}

// forWorkspace returns the server for the session workspace dir, which
// must be a directory (not a symlink) directly below the workspace root.
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

// buildWorkspace makes the server of the workspace dir.
func (s *Server) buildWorkspace(dir string, _ fs.FileInfo) (*Server, error) {
	push, err := policy.NewPushChecker(dir, s.push.ProtectedBranches, s.push.Resolver)
	if err != nil {
		return nil, err
	}
	c := &Server{
		sandbox:       dir,
		mirrors:       s.mirrors, // mirrors are keyed by the repository's path, so per workspace
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
	}
	c.tools = toolargs.NewSet(ServerName, c, toolDefs, c.fail)
	return c, nil
}

// workspaceFor returns the session server whose workspace holds the
// canonical path p (ok false when p is not below the workspace root): the
// policy engine inspects a session's push by its repository's path, with
// no session in sight.
func (s *Server) workspaceFor(p string) (c *Server, ok bool, err error) {
	if s.ws == nil || !within(s.ws.Root(), p) {
		return nil, false, nil
	}
	rel, err := filepath.Rel(s.ws.Root(), p)
	if err != nil || rel == "." {
		return nil, true, &toolError{msg: errWorkspace.Error(), err: fmt.Errorf("%q names no workspace", p)}
	}
	first, _, _ := strings.Cut(rel, "/")
	c, err = s.forWorkspace(filepath.Join(s.ws.Root(), first))
	return c, true, err
}
