// Package external runs an external MCP server and adapts it to
// servers.Server, so the hub exposes its tools as "<name>__<tool>" like a
// built-in server. The server is reached in one of three modes: a child
// process of the gateway (any stdio MCP server from gateway.yaml: command,
// args, env; the default), its own container started by the launcher
// (image: mode, Config.Launch), or a remote or sidecar server over
// streamable HTTP (url: mode, Config.Transport, NewHTTPTransport: dialed
// through a Guard (netguard), every request recorded). The modes share
// everything but the connection: listing, pinning hooks, restarts with
// back-off; the two stdio modes also share a cap on one stdout line
// (MaxLineBytes).
//
// The child's environment is built from scratch: PATH and a private HOME,
// plus exactly the variables the configuration names. The gateway's own
// secrets (GITHUB_TOKEN, model API keys, the database URL) are never
// inherited. Its stderr goes to the log, line by line. The child runs in its
// own process group and is killed with it.
//
// Its tools are listed at the first start; the hub exposes only those the
// policy engine has an annotation for (tool-annotations.json) whose
// definition matches the pin kept with it, so a tool the server adds later,
// or one nobody annotated or pinned, is never callable. The tools are listed
// again when the server sends notifications/tools/list_changed and after
// each restart, and the hub is told (OnToolsChanged), so that it hides a
// tool whose definition no longer matches its pin. When the process exits
// the server restarts it with a growing back-off (counted in
// ironcurtain_external_server_restarts_total); calls made while it is down
// fail with a clear error.
package external

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
)

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultMinBackoff   = time.Second
	DefaultMaxBackoff   = 30 * time.Second
	DefaultPath         = "/usr/local/bin:/usr/bin:/bin"
	// maxStderrLine caps one logged stderr line.
	maxStderrLine = 4096
	// maxErrorText caps an error message of the child shown to the agent.
	maxErrorText = 500
	// stopGrace is how long a child may take to exit after its stdin closes.
	stopGrace = 3 * time.Second
	// exitGrace is how long a transport failure waits to see the process exit.
	exitGrace = 500 * time.Millisecond
	// MaxLineBytes caps one line (one JSON-RPC message) of a server's
	// stdout; a longer one ends the run, which is then restarted.
	MaxLineBytes = 16 << 20
	// relistEvery bounds how often list_changed notifications make the
	// server list its tools again.
	relistEvery = 500 * time.Millisecond
)

// Config launches one external server.
type Config struct {
	// Name is the server name (the tools' prefix).
	Name string
	// Command is the executable (a path, or a name looked up in PATH).
	Command string
	Args    []string
	// Env are the child's variables besides PATH and HOME (which it may
	// override). Values are used as given: resolve references to secrets
	// before (config does).
	Env map[string]string
	// Dir is the working directory (default: the private HOME).
	Dir string
	// StartTimeout bounds starting the process, initialize and tools/list.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart; the wait
	// doubles after each failed start and resets after a healthy minute.
	MinBackoff, MaxBackoff time.Duration
	// Launch, when set, runs the server in its own container instead of
	// Command (image: mode): it returns the container's stdio, from the
	// launcher (launcher.Client.Launcher). Each restart calls it again.
	Launch func(ctx context.Context) (io.ReadWriteCloser, error)
	// MaxLineBytes caps one stdout line (default MaxLineBytes).
	MaxLineBytes int
	// Transport, when set, opens the server's connection instead of a child
	// process or a container (url: mode, NewHTTPTransport); Command and
	// Launch are then empty, and Args, Env and Dir are ignored.
	Transport Transport
}

// Transport opens runs of an external server's MCP connection that is not
// a stdio one (url: mode). Pinning, tool listing, restarts with back-off
// and calls are the same whatever the mode.
type Transport interface {
	// Open starts one run. The context bounds only the start.
	Open(ctx context.Context) (*Conn, error)
	// Close releases what the transport keeps between runs.
	Close() error
}

// Conn is one run of a Transport's connection.
type Conn struct {
	// MCP carries the JSON-RPC messages; the server starts it.
	MCP transport.Interface
	// Done is closed when the run has ended (the remote session was lost);
	// the server then restarts it.
	Done <-chan struct{}
	// Err says why the run ended; it is called after Done is closed.
	Err func() error
	// Stop ends the run and returns once it has ended.
	Stop func()
}

// Deps are the server's collaborators.
type Deps struct {
	Logger  *slog.Logger
	Metrics *metrics.ToolCalls
	// Getenv reads the gateway's environment for PATH (default os.Getenv).
	Getenv func(string) string
}

// Server is a running external server.
type Server struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics.ToolCalls
	env  []string
	home string

	mu       sync.Mutex
	tools    []servers.Tool // the latest listing
	watchers []func([]servers.Tool)
	cur      *proc
	closed   bool
	stop     chan struct{}
	stopped  chan struct{}
	// relist is signalled (never blocking) when the server says its tools
	// changed; one goroutine lists them again, so a flood of notifications
	// costs at most one listing at a time.
	relist   chan struct{}
	relisted chan struct{}
}

var _ servers.Server = (*Server)(nil)

// proc is one run of the server (a child process, a container or a
// Transport's connection).
type proc struct {
	stdin  io.WriteCloser // nil for a Transport's run
	conn   *Conn          // a Transport's run, else nil
	client *client.Client
	exited chan struct{} // closed when the run has ended
	err    error         // the exit error, set before exited closes
	once   sync.Once
	// forceKill ends the run when closing stdin did not.
	forceKill func()
}

// exit records the end of the run (the first call wins).
func (p *proc) exit(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.exited)
	})
}

// ended says why the run ended (valid once exited is closed).
func (p *proc) ended() error {
	if p.conn != nil {
		return p.err // the transport says what ended
	}
	return fmt.Errorf("the process exited (%v)", p.err)
}

// Errors of Call while the child is not usable.
var (
	ErrRestarting = errors.New("external server is restarting")
	ErrClosed     = errors.New("external server is closed")
)

// Start launches the server, initialises it and lists its tools. The
// context bounds only the start; the server runs until Close.
func Start(ctx context.Context, cfg Config, d Deps) (*Server, error) {
	modes := 0
	for _, set := range []bool{cfg.Command != "", cfg.Launch != nil, cfg.Transport != nil} {
		if set {
			modes++
		}
	}
	if cfg.Name == "" || modes != 1 {
		return nil, fmt.Errorf("starting external server %q: name and command are required (or, in image mode, a launcher; in url mode, a transport), and only one of the three", cfg.Name)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = MaxLineBytes
	}
	if d.Getenv == nil {
		d.Getenv = os.Getenv
	}
	s := &Server{cfg: cfg, log: d.Logger, m: d.Metrics, stop: make(chan struct{}), stopped: make(chan struct{}),
		relist: make(chan struct{}, 1), relisted: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("server", cfg.Name)
	var home string
	if cfg.Transport == nil {
		var err error
		home, err = os.MkdirTemp("", "ironcurtain-ext-"+safeFileName(cfg.Name)+"-")
		if err != nil {
			return nil, fmt.Errorf("starting external server %q: creating its home directory: %w", cfg.Name, err)
		}
		s.home = home
		s.env = childEnv(cfg.Env, d.Getenv("PATH"), home)
	}

	p, tools, err := s.launch(ctx)
	if err != nil {
		if home != "" {
			_ = os.RemoveAll(home)
		}
		if cfg.Transport != nil {
			_ = cfg.Transport.Close()
		}
		return nil, fmt.Errorf("starting external server %q: %w", cfg.Name, err)
	}
	s.tools = tools
	s.cur = p
	go s.supervise(p)
	go s.relister()
	return s, nil
}

// childEnv is the child's whole environment, sorted.
func childEnv(extra map[string]string, path, home string) []string {
	if path == "" {
		path = DefaultPath
	}
	m := map[string]string{"PATH": path, "HOME": home, "LANG": "C.UTF-8"}
	for k, v := range extra {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// launch starts a run (a process, a container through the launcher, or a
// Transport's connection), initialises it and lists its tools.
func (s *Server) launch(ctx context.Context) (*proc, []servers.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	var (
		p   *proc
		mc  transport.Interface
		err error
	)
	if s.cfg.Transport != nil {
		p, mc, err = s.openTransport(ctx)
		if err != nil {
			return nil, nil, err
		}
	} else {
		var stdout io.Reader
		if s.cfg.Launch != nil {
			p, stdout, err = s.startContainer(ctx)
		} else {
			p, stdout, err = s.startProcess()
		}
		if err != nil {
			return nil, nil, err
		}
		// A line longer than MaxLineBytes ends the run (an output flood costs
		// the gateway at most that much).
		stdout = &lineLimiter{r: stdout, max: s.cfg.MaxLineBytes, over: func() {
			s.log.Warn("external server wrote a line longer than the limit; stopping it", "limit_bytes", s.cfg.MaxLineBytes)
			p.forceKill()
		}}
		mc = transport.NewIO(stdout, p.stdin, nil)
	}
	c := client.NewClient(mc)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case s.relist <- struct{}{}:
			default: // a listing is already due
			}
		}
	})
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		s.kill(p)
		return nil, nil, fmt.Errorf("starting MCP client: %w", err)
	}
	p.client = c
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "ironcurtain-gateway", Version: "1"}
	if _, err := s.withExit(ctx, p, func(ctx context.Context) error {
		_, err := c.Initialize(ctx, init)
		return err
	}); err != nil {
		s.kill(p)
		return nil, nil, fmt.Errorf("initializing: %w", err)
	}
	tools, err := s.listTools(ctx, p)
	if err != nil {
		s.kill(p)
		return nil, nil, err
	}
	return p, tools, nil
}

// startProcess starts the child process (command: mode).
func (s *Server) startProcess() (*proc, io.Reader, error) {
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = s.env
	cmd.Dir = s.cfg.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.home
	}
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	// stderr is an os.Pipe, not StderrPipe: Wait must not depend on a
	// grandchild that keeps stderr open.
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	cmd.Stderr = stderrW
	err = cmd.Start()
	_ = stderrW.Close()
	if err != nil {
		_ = stderrR.Close()
		return nil, nil, fmt.Errorf("running %s: %w", filepath.Base(s.cfg.Command), err)
	}
	p := &proc{stdin: stdin, exited: make(chan struct{}), forceKill: func() { killProcessGroup(cmd) }}
	go func() {
		defer stderrR.Close()
		s.logStderr(stderrR)
	}()
	go func() { p.exit(cmd.Wait()) }()
	return p, stdout, nil
}

// startContainer asks the launcher to start the server's container (image:
// mode). The container's stderr goes to the launcher's log; its stdout
// ending is the run's exit.
func (s *Server) startContainer(ctx context.Context) (*proc, io.Reader, error) {
	rwc, err := s.cfg.Launch(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the container: %w", err)
	}
	p := &proc{stdin: stdinOf{rwc}, exited: make(chan struct{})}
	p.forceKill = func() {
		_ = rwc.Close()
		p.exit(errors.New("stopped by the gateway"))
	}
	return p, &exitReader{r: rwc, p: p}, nil
}

// openTransport opens a run of the configured Transport (url: mode). The
// run ends when its connection says so (Conn.Done).
func (s *Server) openTransport(ctx context.Context) (*proc, transport.Interface, error) {
	conn, err := s.cfg.Transport.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	p := &proc{conn: conn, exited: make(chan struct{}), forceKill: conn.Stop}
	go func() {
		<-conn.Done
		p.exit(conn.Err())
	}()
	return p, conn.MCP, nil
}

// listTools lists the tools of the running process p.
func (s *Server) listTools(ctx context.Context, p *proc) ([]servers.Tool, error) {
	var listed *mcp.ListToolsResult
	if _, err := s.withExit(ctx, p, func(ctx context.Context) error {
		var err error
		listed, err = p.client.ListTools(ctx, mcp.ListToolsRequest{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	tools := make([]servers.Tool, 0, len(listed.Tools))
	for _, t := range listed.Tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("encoding the schema of tool %q: %w", t.Name, err)
		}
		tools = append(tools, servers.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return tools, nil
}

// OnToolsChanged registers f to be told the server's tools each time they
// are listed again (after notifications/tools/list_changed or a restart).
// f must not block for long; it runs on the server's listing goroutine.
func (s *Server) OnToolsChanged(f func([]servers.Tool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, f)
}

// relister lists the tools again each time the server says they changed.
func (s *Server) relister() {
	defer close(s.relisted)
	for {
		select {
		case <-s.stop:
			return
		case <-s.relist:
		}
		s.mu.Lock()
		p := s.cur
		s.mu.Unlock()
		if p == nil {
			continue // restarting: the restart lists them
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StartTimeout)
		tools, err := s.listTools(ctx, p)
		cancel()
		if err != nil {
			s.log.Warn("listing the tools again after notifications/tools/list_changed failed", "err", err)
			continue
		}
		s.log.Info("external server changed its tool list; listed again", "tools", len(tools))
		s.setTools(tools)
		// A server that floods list_changed is listed at most once per
		// relistEvery; the last notification is not lost (relist stays set).
		select {
		case <-s.stop:
			return
		case <-time.After(relistEvery):
		}
	}
}

// setTools stores a new listing and tells the watchers.
func (s *Server) setTools(tools []servers.Tool) {
	s.mu.Lock()
	s.tools = tools
	ws := slices.Clone(s.watchers)
	s.mu.Unlock()
	for _, f := range ws {
		f(append([]servers.Tool(nil), tools...))
	}
}

// withExit runs f, failing fast if the process exits meanwhile. exited is
// true when the failure is the process's or the transport's (not an answer
// of the server).
func (s *Server) withExit(ctx context.Context, p *proc, f func(context.Context) error) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		var te *transport.Error
		if err != nil && ctx.Err() == nil && errors.As(err, &te) {
			// The transport failed: it is usually because the process is
			// exiting; say so when it has.
			select {
			case <-p.exited:
				return true, p.ended()
			case <-time.After(exitGrace):
				return true, fmt.Errorf("talking to the process: %w", err)
			}
		}
		return false, err
	case <-p.exited:
		cancel()
		<-done
		return true, p.ended()
	}
}

// logStderr logs the child's stderr line by line.
func (s *Server) logStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxStderrLine)
	for {
		for sc.Scan() {
			s.log.Info("external server stderr", "line", sc.Text())
		}
		if !errors.Is(sc.Err(), bufio.ErrTooLong) {
			return
		}
		s.log.Info("external server stderr", "line", "[line longer than 4096 bytes dropped]")
		// Skip the rest of the long line, then carry on.
		br := bufio.NewReader(r)
		if _, err := br.ReadString('\n'); err != nil {
			return
		}
		sc = bufio.NewScanner(br)
		sc.Buffer(make([]byte, 0, 4096), maxStderrLine)
	}
}

// supervise waits for p to exit and restarts the server until Close.
func (s *Server) supervise(p *proc) {
	defer close(s.stopped)
	backoff := s.cfg.MinBackoff
	for {
		started := time.Now()
		select {
		case <-s.stop:
			return
		case <-p.exited:
		}
		s.mu.Lock()
		if s.cur == p {
			s.cur = nil
		}
		closed := s.closed
		s.mu.Unlock()
		if p.client != nil {
			_ = p.client.Close()
		}
		if closed {
			return
		}
		s.log.Warn("external server exited; restarting", "err", fmt.Sprint(p.ended()), "backoff", backoff)
		if time.Since(started) > time.Minute {
			backoff = s.cfg.MinBackoff
		}
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, s.cfg.MaxBackoff)
			np, tools, err := s.launch(context.Background())
			if err != nil {
				s.log.Error("external server restart failed", "err", err, "next_backoff", backoff)
				continue
			}
			s.m.Restart(s.cfg.Name)
			s.mu.Lock()
			if !sameTools(s.tools, tools) {
				s.log.Warn("external server lists different tools after a restart; the hub exposes only the first list's tools")
			}
			if s.closed {
				s.mu.Unlock()
				s.kill(np)
				return
			}
			s.cur = np
			s.mu.Unlock()
			// The hub checks the new definitions against their pins.
			s.setTools(tools)
			p = np
			break
		}
	}
}

func sameTools(a, b []servers.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	names := map[string]bool{}
	for _, t := range a {
		names[t.Name] = true
	}
	for _, t := range b {
		if !names[t.Name] {
			return false
		}
	}
	return true
}

// kill ends p: closes its stdin, waits a little, then kills its group (a
// Transport's run is stopped at once).
func (s *Server) kill(p *proc) {
	if p.client != nil {
		_ = p.client.Close()
	}
	if p.stdin != nil {
		_ = p.stdin.Close()
		select {
		case <-p.exited:
			return
		case <-time.After(stopGrace):
		}
	}
	p.forceKill()
	<-p.exited
}

// Name implements servers.Server.
func (s *Server) Name() string { return s.cfg.Name }

// Tools implements servers.Server: the latest listing (at the first start,
// then after each list_changed notification or restart).
func (s *Server) Tools() []servers.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]servers.Tool(nil), s.tools...)
}

// Call implements servers.Server.
func (s *Server) Call(ctx context.Context, tool string, args map[string]any) (servers.Result, error) {
	s.mu.Lock()
	p, closed := s.cur, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return servers.Result{}, ErrClosed
	case p == nil:
		return servers.ToolError(fmt.Sprintf("%s is restarting after it stopped; try again shortly", s.cfg.Name)), nil
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	var res *mcp.CallToolResult
	exited, err := s.withExit(ctx, p, func(ctx context.Context) error {
		var err error
		res, err = p.client.CallTool(ctx, req)
		return err
	})
	switch {
	case exited:
		return servers.Result{}, fmt.Errorf("calling %s on external server %s: %w", tool, s.cfg.Name, err)
	case err != nil && ctx.Err() != nil:
		return servers.Result{}, fmt.Errorf("calling %s on external server %s: %w", tool, s.cfg.Name, ctx.Err())
	case err != nil:
		// A JSON-RPC error from the server: the agent may correct its call.
		return servers.ToolError(fmt.Sprintf("%s refused the call: %s", s.cfg.Name, cut(err.Error(), maxErrorText))), nil
	}
	return convert(res), nil
}

// Close stops the server and its process.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	p := s.cur
	s.cur = nil
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
	if p != nil {
		s.kill(p)
	}
	<-s.relisted
	var errs []error
	if s.cfg.Transport != nil {
		if err := s.cfg.Transport.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.home != "" {
		if err := os.RemoveAll(s.home); err != nil {
			errs = append(errs, fmt.Errorf("removing its home: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing external server %s: %w", s.cfg.Name, err)
	}
	return nil
}

// convert turns an MCP result into a servers.Result. Content other than
// text and images is described, not passed on.
func convert(r *mcp.CallToolResult) servers.Result {
	out := servers.Result{IsError: r.IsError}
	for _, c := range r.Content {
		switch v := c.(type) {
		case mcp.TextContent:
			out.Content = append(out.Content, servers.Content{Type: "text", Text: v.Text})
		case *mcp.TextContent:
			out.Content = append(out.Content, servers.Content{Type: "text", Text: v.Text})
		case mcp.ImageContent:
			out.Content = append(out.Content, servers.Content{Type: "image", Data: v.Data, MIMEType: v.MIMEType})
		case *mcp.ImageContent:
			out.Content = append(out.Content, servers.Content{Type: "image", Data: v.Data, MIMEType: v.MIMEType})
		default:
			out.Content = append(out.Content, servers.Content{Type: "text", Text: fmt.Sprintf("[%T content left out by the gateway]", c)})
		}
	}
	if len(out.Content) == 0 && r.StructuredContent != nil {
		b, err := json.Marshal(r.StructuredContent)
		if err != nil {
			b = []byte("[structured content that could not be encoded]")
		}
		out.Content = append(out.Content, servers.Content{Type: "text", Text: string(b)})
	}
	return out
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
