// Package git is the gateway's built-in "git" tool server: status, diff,
// log, show, blame, add, commit, branch, checkout, merge, rebase,
// cherry_pick, reset, stash, tag, remote, fetch, pull, push, clone, init and
// worktree on repositories inside the sandbox.
//
// The repositories are agent-writable and therefore hostile input. Every
// call:
//
//   - checks the repository path on the raw string and finds the repository
//     explicitly (gitexec.FindRepo): its work tree, git directory and common
//     directory must all lie inside the sandbox;
//   - refuses git directories holding symbolic links, alternates, FIFOs or
//     devices (gitexec.CheckGitDir) and repositories whose config defines
//     executable settings (gitexec's scanner: core.fsmonitor,
//     core.sshCommand, filter.*, diff.*.textconv, include.path, ...);
//   - runs git through gitexec (no shell, no inherited GIT_* environment,
//     system and global config off, hooks and fsmonitor off, a timeout, an
//     output cap) with further overrides that stop workspace commands from
//     reaching the network or reading files named by the repository config;
//   - refuses every ref, revision, remote or path value that starts with '-'
//     (even when such a ref exists) and passes paths after "--" and
//     revisions after "--end-of-options" where git supports it.
//
// fetch, pull, push and clone never use credentials in the workspace: the
// objects move through a bare mirror in a gateway-private directory
// (MirrorDir). A push fetches the checked source objects from the workspace
// into the mirror and pushes from there to the explicit URLs of the
// policy-checked plan with explicit refs/heads/X:refs/heads/Y refspecs;
// fetch, pull and clone fetch into the mirror and then from the mirror into
// the workspace. Credentials reach git only in the mirror, through a
// credential helper script that reads a gateway secret file and answers
// only for the configured HTTPS hosts, or through GIT_SSH_COMMAND set by the
// gateway (its key, its known_hosts, strict host key checking). They never
// appear in argv, URLs, results or logs.
//
// Network operations are bound to the policy decision: the URLs the policy
// judged travel in servers.CallInfo.PolicyArgs and, for a push, the checked
// plan in servers.CallInfo.Push (or policy.WithPushPlan); a call whose
// repository now resolves differently is refused, and a call without them
// is refused too.
//
// Residual risk (documented): the configuration scan and the git run are
// separate steps. Settings with fixed names are also overridden on the
// command line (so changing them in between achieves nothing), but filter,
// diff and merge drivers are named by .gitattributes and cannot all be
// overridden; a process that can write .git/config directly (not the agent
// through the gateway: the policy protects .git/config) could race a driver
// in between.
package git

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/gitmirror"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// ServerName is the name the hub exposes the tools under ("git__status").
const ServerName = "git"

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultNetworkTimeout = 5 * time.Minute
	DefaultMaxOutput      = 1 << 20
	DefaultAuthorName     = "IronCurtain Agent"
	DefaultAuthorEmail    = "agent@ironcurtain.invalid"
)

// Config configures a Server.
type Config struct {
	// Sink receives one egress row per network operation (fetch, push,
	// ls-remote), linked to the call (servers.NewEgressEvent). Without it
	// every network operation is refused.
	Sink audit.Sink
	// Sandbox is the directory the agent's repositories live in. Symlinks in
	// it are resolved once, at New.
	Sandbox string
	// MirrorDir is a gateway-private directory (never agent-writable, never
	// inside the sandbox) holding the bare mirrors network operations run in
	// and the credential helper. It is created with mode 0700 if missing.
	MirrorDir string
	// Credentials used by network operations, only inside the mirror.
	Credentials Credentials
	// ProtectedBranches may not be pushed to (default main, master). Ignored
	// when PushChecker is set.
	ProtectedBranches []string
	// PushChecker is the policy engine's checker (Engine.PushChecker), so
	// that the server recomputes exactly the policy's plan. Nil: one is
	// built from Sandbox and ProtectedBranches.
	PushChecker *policy.PushChecker
	// Author is the identity of commits, tags and merges made through the
	// server (default "IronCurtain Agent <agent@ironcurtain.invalid>").
	AuthorName, AuthorEmail string
	// Timeout bounds local git commands, NetworkTimeout fetch/push/clone.
	Timeout, NetworkTimeout time.Duration
	// MaxOutput caps the output of one git command (and so of a result).
	MaxOutput int
	// Git is the git binary (default "git" from PATH).
	Git string
	// MaxScanBytes bounds the commit messages and added blobs of one push
	// scanned for secrets (InspectPush; secrets.max_push_bytes); default
	// gitscan.DefaultMaxBytes.
	MaxScanBytes int64
	// Logger receives failure details (never shown to the agent).
	Logger *slog.Logger
	// WorkspaceRoot is the directory holding the minted sessions' own
	// sandboxes (gateway.yaml: session_workspaces.root). A call from a
	// session with a workspace (session.Session.Workspace, from the
	// context) is served with that workspace as the sandbox; without
	// WorkspaceRoot such a call is refused (workspaces.go).
	WorkspaceRoot string

	// UnsafeAllowLocalRemotes (tests only) lets remote values and clone URLs
	// be local paths or file:// URLs and allows the file transport in the
	// mirror. Never set it in a deployment: a local remote reads any
	// repository on the gateway's file system.
	UnsafeAllowLocalRemotes bool
	// UnsafeSkipApprovalBinding (tests only) runs network operations
	// without the policy-judged URLs in servers.CallInfo.
	UnsafeSkipApprovalBinding bool
	// UnsafeTestCAFile (tests only) is a CA bundle the mirror trusts for
	// HTTPS, for a local test server.
	UnsafeTestCAFile string
}

// Credentials are the gateway's secrets for git remotes (used in the
// mirrors only).
type Credentials = gitmirror.Credentials

// Server is the git tool server. It is safe for concurrent use.
type Server struct {
	sink       audit.Sink
	sandbox    string
	mirrors    *gitmirror.Mirrors // the mirrors network operations run in, shared with workspaces' servers
	push       *policy.PushChecker
	authorName string
	authorMail string
	timeout    time.Duration
	netTimeout time.Duration
	maxOutput  int
	maxScan    int64
	git        string
	log        *slog.Logger

	unsafeLocal   bool
	unsafeUnbound bool
	tools         *toolargs.Set
	ws            *workspaces // per-session sandboxes; nil in a session's server (workspaces.go)
	scanCache     scanCache
}

var _ servers.Server = (*Server)(nil)

// New validates cfg and prepares the mirror directory.
func New(cfg Config) (*Server, error) {
	if cfg.Sandbox == "" || !filepath.IsAbs(cfg.Sandbox) {
		return nil, fmt.Errorf("configuring git server: Sandbox %q must be an absolute path", cfg.Sandbox)
	}
	sandbox, err := filepath.EvalSymlinks(cfg.Sandbox)
	if err != nil {
		return nil, fmt.Errorf("resolving git sandbox %q: %w", cfg.Sandbox, err)
	}
	if cfg.MirrorDir == "" || !filepath.IsAbs(cfg.MirrorDir) {
		return nil, fmt.Errorf("configuring git server: MirrorDir %q must be an absolute path", cfg.MirrorDir)
	}
	if err := os.MkdirAll(cfg.MirrorDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating git mirror directory: %w", err)
	}
	mirrorDir, err := filepath.EvalSymlinks(cfg.MirrorDir)
	if err != nil {
		return nil, fmt.Errorf("resolving git mirror directory %q: %w", cfg.MirrorDir, err)
	}
	if within(sandbox, mirrorDir) || within(mirrorDir, sandbox) {
		return nil, fmt.Errorf("configuring git server: MirrorDir %q and Sandbox %q must not contain each other", cfg.MirrorDir, cfg.Sandbox)
	}
	if err := checkPrivateDir(mirrorDir); err != nil {
		return nil, fmt.Errorf("configuring git server: MirrorDir %q: %w", cfg.MirrorDir, err)
	}
	s := &Server{
		sink:          cfg.Sink,
		sandbox:       sandbox,
		push:          cfg.PushChecker,
		authorName:    cfg.AuthorName,
		authorMail:    cfg.AuthorEmail,
		timeout:       cfg.Timeout,
		netTimeout:    cfg.NetworkTimeout,
		maxOutput:     cfg.MaxOutput,
		maxScan:       cfg.MaxScanBytes,
		git:           cfg.Git,
		log:           cfg.Logger,
		unsafeLocal:   cfg.UnsafeAllowLocalRemotes,
		unsafeUnbound: cfg.UnsafeSkipApprovalBinding,
	}
	if s.push == nil {
		s.push, err = policy.NewPushChecker(sandbox, cfg.ProtectedBranches, gitremote.New(gitremote.Options{}))
		if err != nil {
			return nil, fmt.Errorf("configuring git server: ProtectedBranches: %w", err)
		}
	}
	if s.authorName == "" {
		s.authorName = DefaultAuthorName
	}
	if s.authorMail == "" {
		s.authorMail = DefaultAuthorEmail
	}
	if err := checkIdentity(s.authorName, s.authorMail); err != nil {
		return nil, fmt.Errorf("configuring git server: AuthorName/AuthorEmail: %w", err)
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.netTimeout <= 0 {
		s.netTimeout = DefaultNetworkTimeout
	}
	if s.maxOutput <= 0 {
		s.maxOutput = DefaultMaxOutput
	}
	if s.git == "" {
		s.git = "git"
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mirrors, err = gitmirror.New(gitmirror.Config{Dir: mirrorDir, Sandbox: sandbox, Credentials: cfg.Credentials,
		Timeout: s.timeout, NetworkTimeout: s.netTimeout, MaxOutput: s.maxOutput, Git: s.git,
		UnsafeAllowLocal: s.unsafeLocal, UnsafeTestCAFile: cfg.UnsafeTestCAFile})
	if err != nil {
		return nil, err
	}
	s.tools = toolargs.NewSet(ServerName, s, toolDefs, s.fail)
	if s.ws, err = s.newWorkspaces(cfg.WorkspaceRoot, sandbox, mirrorDir); err != nil {
		return nil, err
	}
	return s, nil
}

// checkPrivateDir refuses a mirror directory others can write.
func checkPrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a directory")
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("is writable by group or others (mode %o)", fi.Mode().Perm())
	}
	return nil
}

func checkIdentity(name, mail string) error {
	for _, v := range []string{name, mail} {
		if strings.ContainsAny(v, "<>\n\r\x00") {
			return fmt.Errorf("%q contains <, > or a line break", v)
		}
	}
	return nil
}

// Mirrors returns the mirrors the server's network operations run in; the
// git smart HTTP door serves and pushes through the same ones.
func (s *Server) Mirrors() *gitmirror.Mirrors { return s.mirrors }

// Name returns "git".
func (s *Server) Name() string { return ServerName }

// Tools lists the tools with their schemas and policy annotations.
func (s *Server) Tools() []servers.Tool { return s.tools.Tools() }

// Call runs one tool. Failures the agent should see come back as an IsError
// result with a short message; the returned error is reserved for a
// cancelled context.
func (s *Server) Call(ctx context.Context, tool string, raw map[string]any) (servers.Result, error) {
	if sess, ok := session.FromContext(ctx); ok && sess.Workspace != "" {
		child, err := s.forWorkspace(sess.Workspace) // workspaces.go
		if err != nil {
			return s.fail(tool, err), nil
		}
		return child.tools.Call(ctx, tool, raw)
	}
	return s.tools.Call(ctx, tool, raw)
}

// fail turns err into an agent-safe tool error and logs the detail.
func (s *Server) fail(tool string, err error) servers.Result {
	msg := s.redact(safeMessage(err))
	s.log.Warn("git tool failed", "tool", tool, "error", s.redact(err.Error()), "shown", msg)
	return servers.ToolError(msg)
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	if p == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, root+"/")
}
