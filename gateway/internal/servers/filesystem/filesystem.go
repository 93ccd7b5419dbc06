// Package filesystem is the gateway's built-in "filesystem" tool server: the
// tool set of the reference MCP filesystem server (read_text_file,
// write_file, edit_file, move_file, directory_tree, search_files, ...),
// confined to one sandbox directory.
//
// The hub calls it with transport arguments the policy engine has already
// canonicalised (absolute realpaths) and allowed. The server is nevertheless
// the last line of defence and trusts none of it:
//
//   - every path is checked on the raw string (no control characters, absolute,
//     already clean, equal to the sandbox or under it by a separator boundary)
//     and converted to a path relative to the sandbox;
//   - all I/O goes through an os.Root opened on the sandbox, which resolves
//     every component with O_NOFOLLOW and refuses symlinks (dangling or not)
//     and ".." that leave it;
//   - files are opened non-blocking, fstat-ed and compared with an lstat
//     through the root, so a leaf swapped for a symlink, FIFO or other file
//     between check and use is refused;
//   - writes go to a fresh temporary file (O_CREAT|O_EXCL) that is renamed
//     over the target: rename replaces a symlink instead of following it,
//     so a write can never land outside the sandbox, and an existing file
//     with several hard links (a link can point at a file outside the
//     sandbox, which os.Root cannot see) is refused;
//   - reads, writes, listings and searches are capped in size.
//
// Errors that reach the agent are short and never name a host path outside
// the sandbox; details go to the logger.
package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/internal/session"
)

// Defaults applied when the corresponding Config field is zero.
const (
	// DefaultMaxReadBytes caps one file read (text or media) and the sum of
	// a read_multiple_files call.
	DefaultMaxReadBytes = 8 << 20
	// DefaultMaxWriteBytes caps the content of write_file and the result of
	// edit_file.
	DefaultMaxWriteBytes = 8 << 20
	// DefaultMaxEntries caps the entries listed by list_directory*,
	// directory_tree and visited by search_files.
	DefaultMaxEntries = 20000
)

// Limits that are not configurable.
const (
	maxMultipleFiles = 100  // paths in one read_multiple_files call
	maxEdits         = 1000 // edits in one edit_file call
	maxPatterns      = 100  // excludePatterns entries
	maxPatternLen    = 1024 // bytes in one glob pattern
	maxTreeDepth     = 128  // directory_tree / search_files recursion depth
)

// ServerName is the name the hub exposes the tools under ("filesystem__...").
const ServerName = "filesystem"

// Config configures a Server.
type Config struct {
	// Root is the sandbox directory. It must exist; symlinks in it are
	// resolved once, at New, so that it compares equal to the realpaths the
	// policy engine produces.
	Root string
	// MaxReadBytes, MaxWriteBytes and MaxEntries override the defaults.
	MaxReadBytes  int64
	MaxWriteBytes int64
	MaxEntries    int
	// ReadOnlyDirs are directories outside the sandbox that the read tools
	// (read_*, list_*, directory_tree, search_files, get_file_info) may
	// read; the write tools (write_file, edit_file, create_directory,
	// move_file) never reach them. Each must exist and must not overlap the
	// sandbox or another; symlinks in them are resolved once, at New, and
	// I/O goes through an os.Root per directory, so nothing read there can
	// lead out of it.
	ReadOnlyDirs []string
	// Logger receives the detail of failures (never shown to the agent).
	// Nil discards.
	Logger *slog.Logger
	// WorkspaceRoot is the directory holding the minted sessions' own
	// sandboxes (gateway.yaml: session_workspaces.root). A call from a
	// session with a workspace (session.Session.Workspace, from the
	// context) is served by an os.Root on that workspace, which must be a
	// directory directly below WorkspaceRoot; without WorkspaceRoot such a
	// call is refused (workspaces.go).
	WorkspaceRoot string
}

// Server is the filesystem tool server. It is safe for concurrent use.
type Server struct {
	root     *os.Root
	rootPath string  // realpath of the sandbox
	sb       *area   // the sandbox as an area (root, rootPath)
	ro       []*area // read-only directories (Config.ReadOnlyDirs)
	maxRead  int64
	maxWrite int64
	maxEnt   int
	log      *slog.Logger
	tools    *toolargs.Set
	ws       *workspaces // per-session sandboxes; nil in a session's server (workspaces.go)
}

var _ servers.Server = (*Server)(nil)

// New opens the sandbox and returns the server.
func New(cfg Config) (*Server, error) {
	if cfg.Root == "" {
		return nil, errors.New("configuring filesystem server: Root is empty")
	}
	if !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("configuring filesystem server: Root %q is not absolute", cfg.Root)
	}
	real, err := filepath.EvalSymlinks(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("resolving filesystem sandbox %q: %w", cfg.Root, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("resolving filesystem sandbox %q: %w", cfg.Root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("configuring filesystem server: Root %q is not a directory", cfg.Root)
	}
	ro, err := openReadOnlyDirs(real, cfg.ReadOnlyDirs)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		for _, a := range ro {
			a.root.Close()
		}
		return nil, fmt.Errorf("opening filesystem sandbox %q: %w", cfg.Root, err)
	}
	s := &Server{
		root:     root,
		rootPath: real,
		sb:       &area{root: root, path: real},
		ro:       ro,
		maxRead:  cfg.MaxReadBytes,
		maxWrite: cfg.MaxWriteBytes,
		maxEnt:   cfg.MaxEntries,
		log:      cfg.Logger,
	}
	if s.maxRead <= 0 {
		s.maxRead = DefaultMaxReadBytes
	}
	if s.maxWrite <= 0 {
		s.maxWrite = DefaultMaxWriteBytes
	}
	if s.maxEnt <= 0 {
		s.maxEnt = DefaultMaxEntries
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.tools = toolargs.NewSet(ServerName, s, toolDefs, s.fail)
	if s.ws, err = s.newWorkspaces(cfg.WorkspaceRoot, real); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the sandbox's and the read-only directories' handles.
func (s *Server) Close() error {
	err := errors.Join(s.root.Close(), closeWorkspaces(s.ws))
	for _, a := range s.ro {
		err = errors.Join(err, a.root.Close())
	}
	return err
}

// Name returns "filesystem".
func (s *Server) Name() string { return ServerName }

// Root returns the realpath of the sandbox.
func (s *Server) Root() string { return s.rootPath }

// Tools lists the tools with their schemas and policy annotations.
func (s *Server) Tools() []servers.Tool { return s.tools.Tools() }

// Call runs one tool. Failures the agent should see come back as an IsError
// result with a short message; the returned error is reserved for the
// context being cancelled.
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
	msg := safeMessage(err)
	s.log.Warn("filesystem tool failed", "tool", tool, "error", err.Error(), "shown", msg)
	return servers.ToolError(msg)
}

// resolve checks a transport path and returns it relative to the sandbox
// ("." for the sandbox itself). The raw string must be absolute, free of
// control characters and already clean (the policy engine hands over
// realpaths); containment is "equal to the root or root + separator + ...",
// never a string prefix.
func (s *Server) resolve(p string) (string, error) {
	if err := checkRawPath(p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		return "", &toolError{msg: "path must be absolute", err: fmt.Errorf("relative path %q", p)}
	}
	if filepath.Clean(p) != p {
		return "", &toolError{msg: "path is not canonical", err: fmt.Errorf("unclean path %q", p)}
	}
	rel, ok := within(s.rootPath, p)
	if !ok {
		if err := s.readOnlyRefusal(p); err != nil {
			return "", err
		}
		// Do not echo the path: it may be a realpath outside the sandbox.
		return "", &toolError{msg: "access denied: path is outside the sandbox", err: fmt.Errorf("%w: %q", errOutside, p)}
	}
	return rel, nil
}

// within reports whether p (clean, absolute) is root or under it, and
// returns p relative to root in slash form.
func within(root, p string) (string, bool) {
	if p == root {
		return ".", true
	}
	prefix := root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if !strings.HasPrefix(p, prefix) {
		return "", false
	}
	rel := p[len(prefix):]
	if rel == "" {
		return ".", true
	}
	return filepath.ToSlash(rel), true
}

// display turns a root-relative path back into the absolute path the agent
// uses (inside the sandbox, so safe to show).
func (s *Server) display(rel string) string {
	if rel == "." || rel == "" {
		return s.rootPath
	}
	return filepath.Join(s.rootPath, filepath.FromSlash(rel))
}

// checkRawPath refuses empty strings, invalid UTF-8 and control characters
// (NUL included: filepath.Join would silently drop a segment around it).
func checkRawPath(p string) error {
	if p == "" {
		return &toolError{msg: "path is empty"}
	}
	if err := checkText(p); err != nil {
		return &toolError{msg: "path contains control characters or invalid UTF-8", err: err}
	}
	return nil
}

// checkText refuses invalid UTF-8 and C0/C1 control characters and DEL.
func checkText(v string) error {
	for i, r := range v {
		if r == 0xFFFD && !strings.HasPrefix(v[i:], "\uFFFD") {
			return fmt.Errorf("invalid UTF-8 at byte %d", i)
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("control character %U at byte %d", r, i)
		}
	}
	return nil
}

// isNotExist reports a missing file through any wrapping.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
