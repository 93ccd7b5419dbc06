package runcmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/session/minted"
)

// Ops is the part of the ops API a run uses; *opsapi.Client satisfies it.
type Ops interface {
	CreateSession(ctx context.Context, r opsapi.CreateSessionRequest) (opsapi.CreatedSession, error)
	GetSession(ctx context.Context, id string) (opsapi.SessionSummary, error)
	RevokeSession(ctx context.Context, id, reason string) (opsapi.RevokedSession, error)
	ListEscalations(ctx context.Context, f escalation.ListFilter) ([]escalation.Escalation, error)
	Decide(ctx context.Context, id string, approve bool, r opsapi.DecideRequest) (escalation.Escalation, error)
	// WatchEscalations opens the escalation event stream: a value on each
	// change, the channel closed when the stream ends.
	WatchEscalations(ctx context.Context) (<-chan struct{}, error)
}

var _ Ops = (*opsapi.Client)(nil)

// Spec is the agent container of one run.
type Spec struct {
	Name    string
	Image   string
	Cmd     []string
	Env     []string // KEY=VALUE
	Network string
	// Workspace is the host directory mounted read-only as /workspace
	// ("" for none).
	Workspace string
	// TokenFile is the host file holding the session's token, mounted
	// read-only at TokenPath: the token is in no container configuration.
	TokenFile string
	Labels    map[string]string
	// Stdin keeps the container's standard input open (--interactive).
	Stdin bool
}

// Stream is a running container's output (stdout and stderr, demultiplexed
// onto Output) and, with Spec.Stdin, its input.
type Stream struct {
	Output io.Reader
	Input  io.WriteCloser // nil without Spec.Stdin
	Close  func()
}

// Docker is what a run needs of the Docker Engine; Engine implements it.
type Docker interface {
	// CheckNetwork fails when the stack's agent network does not exist.
	CheckNetwork(ctx context.Context, name string) error
	// CheckImage fails when image is not present locally (nothing is pulled).
	CheckImage(ctx context.Context, image string) error
	// Start creates, attaches and starts a container; on error nothing of
	// it is left (id may still be returned and is then removed by the run).
	Start(ctx context.Context, s Spec) (id string, st Stream, err error)
	// Find returns the run container of session ("" when there is none)
	// and its labels.
	Find(ctx context.Context, session string) (id string, labels map[string]string, err error)
	// Attach attaches to a running container.
	Attach(ctx context.Context, id string, stdin bool) (Stream, error)
	// Wait blocks until the container has exited and returns its code.
	Wait(ctx context.Context, id string) (int64, error)
	// Stop asks the container to stop (SIGTERM, then SIGKILL after grace).
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove removes the container, forcing (no error when it is gone).
	Remove(ctx context.Context, id string) error
}

// ErrNotVerified marks a Verifier error that means the check could not
// run (not that the chain is broken).
var ErrNotVerified = errors.New("not verified")

// Verifier checks a session's audit chain and says what it found.
type Verifier interface {
	Verify(ctx context.Context, session string) (string, error)
}

// Deps is what Run works with.
type Deps struct {
	Docker   Docker
	Ops      Ops
	Verifier Verifier // nil: the summary says how to verify
	Stdin    io.Reader
	Stdout   io.Writer // the agent's output
	Stderr   io.Writer // the run's own lines: escalations, prompts, summary
	// Interrupts delivers Ctrl-C: the first stops the agent gracefully,
	// the second forces.
	Interrupts <-chan struct{}
	Now        func() time.Time
	// TempDir is where the session's token file is written ("": the
	// system's temporary directory).
	TempDir string
}

// LabelSession is the label naming a run container's session.
const LabelSession = "dev.ironcurtain.run.session"

// LabelTokenDir is the label naming the host directory of a run
// container's token file (removed when the run ends, also after attach).
const LabelTokenDir = "dev.ironcurtain.run.tokendir"

// TokenPath is where the run container reads its session's token
// (IRONCURTAIN_AGENT_TOKEN_FILE, as the compose agents do).
const TokenPath = "/run/secrets/agent_token"

// ContainerName is the name of session id's run container.
func ContainerName(id string) string { return "ironcurtain-run-" + strings.ToLower(id) }

// cleanupTimeout bounds each cleanup step (they run on a fresh context:
// a cancelled run still removes its container and revokes its session).
const cleanupTimeout = 30 * time.Second

// run is one run in progress.
type run struct {
	o   Options
	d   Deps
	out *lockedWriter
	msg *lockedWriter

	session   string
	container string
	tokenDir  string // host directory of the token file ("" none)
	workspace string // as the host sees it ("" unmounted)
	gwPath    string // as the gateway sees it
	stream    Stream

	seen    map[string]string // escalation id → last status shown
	mine    map[string]bool   // decided from this terminal
	queue   []escalation.Escalation
	started time.Time
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (r *run) say(format string, a ...any) {
	fmt.Fprintf(r.msg, "ironcurtain run: "+format+"\n", a...)
}

// Run runs o. Whatever happens after the session is minted, the container
// is removed and the session revoked before Run returns (except --detach,
// which leaves both to `run attach`).
func Run(ctx context.Context, o Options, d Deps) error {
	if d.Now == nil {
		d.Now = time.Now
	}
	r := &run{o: o, d: d, out: &lockedWriter{w: d.Stdout}, msg: &lockedWriter{w: d.Stderr},
		seen: map[string]string{}, mine: map[string]bool{}, started: d.Now()}
	if o.AttachID != "" {
		return r.attach(ctx)
	}
	if err := d.Docker.CheckNetwork(ctx, o.Network); err != nil {
		return fmt.Errorf("no stack running: network %s: %w (start it with make up, or name it with --network)", o.Network, err)
	}
	if err := d.Docker.CheckImage(ctx, o.Image); err != nil {
		return fmt.Errorf("--agent: image %s is not available locally (make images builds the stack's): %w", o.Image, err)
	}
	labels := map[string]string{"ironcurtain/run": "true"}
	for k, v := range o.Labels {
		labels[k] = v
	}
	created, err := d.Ops.CreateSession(ctx, opsapi.CreateSessionRequest{
		Name: "run-" + d.Now().UTC().Format("20060102-150405"), TTL: o.TTL.String(), Labels: labels,
		Budget: budget(o),
	})
	if err != nil {
		return opsErr(o, err)
	}
	r.session = created.Session.SessionID
	if created.Session.Minted != nil {
		r.gwPath = created.Session.Minted.Workspace
	}
	// From here on every path ends the session.
	if err := r.start(ctx, created.Token); err != nil {
		r.cleanup("the run could not start")
		return err
	}
	if o.Detach {
		r.say("detached; reattach with: ironcurtain run attach %s", r.session)
		fmt.Fprintln(r.out, r.session)
		if r.stream.Close != nil {
			r.stream.Close()
		}
		return nil
	}
	why, code := r.loop(ctx)
	return r.finish(why, code)
}

func budget(o Options) minted.Budget {
	return minted.Budget{MaxCostUSD: o.MaxCostUSD, MaxToolCalls: o.MaxToolCalls}
}

// opsErr says what a failed ops API call means for the user.
func opsErr(o Options, err error) error {
	var ae *opsapi.APIError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden {
			return fmt.Errorf("%w: %s: refused by the ops API at %s (is it the stack's, from compose/.env?)", ErrUsage, EnvOperatorToken, o.OpsURL)
		}
		if ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnprocessableEntity {
			return fmt.Errorf("%w: the ops API refused the session: %s", ErrUsage, ae.Message)
		}
		return fmt.Errorf("minting the session: %w", err)
	}
	return fmt.Errorf("no stack running: the ops API at %s does not answer (make up; or --ops-url): %w", o.OpsURL, err)
}

func (r *run) start(ctx context.Context, token string) error {
	o := r.o
	if r.gwPath != "" && o.WorkspacesDir != "" {
		if filepath.Base(r.gwPath) != r.session {
			return fmt.Errorf("the gateway named workspace %q for session %s", r.gwPath, r.session)
		}
		r.workspace = filepath.Join(o.WorkspacesDir, r.session)
	}
	dir, file, err := writeTokenFile(r.d.TempDir, token)
	r.tokenDir = dir
	if err != nil {
		return fmt.Errorf("writing the session's token file: %w", err)
	}
	// The agent reads the token from the file at start and adds it to the
	// proxy URLs as their password (the runner; the shell's ironcurtain-env).
	proxy := "http://" + o.Proxy
	env := []string{
		"IRONCURTAIN_AGENT_TOKEN_FILE=" + TokenPath,
		"IRONCURTAIN_MODEL=" + o.Model,
		"IRONCURTAIN_GATEWAY_URL=" + o.GatewayURL,
		"IRONCURTAIN_MCP_URL=" + o.GatewayURL + "/mcp",
		"IRONCURTAIN_MODEL_BASE_URL=" + o.GatewayURL + "/llm",
		"HTTPS_PROXY=" + proxy, "HTTP_PROXY=" + proxy, "https_proxy=" + proxy, "http_proxy=" + proxy,
		"NO_PROXY=gateway,localhost,127.0.0.1", "no_proxy=gateway,localhost,127.0.0.1",
	}
	var cmd []string
	switch {
	case o.Agent == "shell":
		cmd = []string{"bash", "-lc", o.Task}
	case o.Interactive:
		cmd = []string{"chat"}
	default:
		cmd = []string{"run", o.Task}
	}
	spec := Spec{Name: ContainerName(r.session), Image: o.Image, Cmd: cmd, Env: env, Network: o.Network,
		Workspace: r.workspace, TokenFile: file, Labels: map[string]string{LabelSession: r.session, LabelTokenDir: dir},
		Stdin: o.Interactive}
	id, st, err := r.d.Docker.Start(ctx, spec)
	r.container = id
	if err != nil {
		return fmt.Errorf("starting the agent container: %w", err)
	}
	r.stream = st
	r.say("session %s, container %s (%s)", r.session, shortID(id), o.Image)
	if o.Interactive && o.Task != "" && st.Input != nil {
		if _, err := io.WriteString(st.Input, o.Task+"\n"); err != nil {
			return fmt.Errorf("sending the task: %w", err)
		}
	}
	return nil
}

func (r *run) attach(ctx context.Context) error {
	s, err := r.d.Ops.GetSession(ctx, r.o.AttachID)
	if err != nil {
		return opsErr(r.o, err)
	}
	id, labels, err := r.d.Docker.Find(ctx, r.o.AttachID)
	if err != nil {
		return fmt.Errorf("attach: finding the run container: %w", err)
	}
	if id == "" {
		return fmt.Errorf("%w: attach: no run container for session %s", ErrUsage, r.o.AttachID)
	}
	r.session, r.container, r.tokenDir = s.SessionID, id, labels[LabelTokenDir]
	if s.Minted != nil {
		r.gwPath = s.Minted.Workspace
	}
	st, err := r.d.Docker.Attach(ctx, id, r.o.Interactive)
	if err != nil {
		r.cleanup("reattaching failed")
		return fmt.Errorf("attach: %w", err)
	}
	r.stream = st
	r.say("attached to session %s, container %s", r.session, shortID(id))
	why, code := r.loop(ctx)
	return r.finish(why, code)
}

type exited struct {
	code int64
	err  error
}

// loop runs until the agent exits, the session ends, or Ctrl-C; it
// returns why the run ended and the agent's exit code (-1 unknown).
func (r *run) loop(ctx context.Context) (string, int64) {
	waitCtx, cancelWait := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWait()
	exitCh := make(chan exited, 1)
	go func() {
		code, err := r.d.Docker.Wait(waitCtx, r.container)
		exitCh <- exited{code, err}
	}()
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		if r.stream.Output != nil {
			aw := newAgentWriter(r.out)
			_, _ = io.Copy(aw, r.stream.Output)
			aw.Flush()
		}
	}()
	lines := make(chan string)
	go func() {
		if r.d.Stdin == nil {
			return
		}
		sc := bufio.NewScanner(r.d.Stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-waitCtx.Done():
				return
			}
		}
	}()
	ev := make(chan struct{}, 1)
	var live atomic.Bool
	go r.watch(waitCtx, ev, &live)
	tick := time.NewTicker(r.o.Poll)
	defer tick.Stop()
	interrupts := 0
	stopping := ""
	stop := func(why string) {
		if stopping != "" {
			return
		}
		stopping = why
		go func() {
			sctx, cancel := context.WithTimeout(context.Background(), r.o.Grace+cleanupTimeout)
			defer cancel()
			_ = r.d.Docker.Stop(sctx, r.container, r.o.Grace)
		}()
	}
	drain := func() {
		select {
		case <-outDone:
		case <-time.After(2 * time.Second):
		}
	}
	polls := 0
	for {
		select {
		case x := <-exitCh:
			drain()
			r.poll(ctx) // escalations decided at the end
			if stopping != "" {
				return stopping, x.code
			}
			if x.err != nil {
				return fmt.Sprintf("waiting for the agent failed: %v", x.err), -1
			}
			return fmt.Sprintf("the agent finished (exit code %d)", x.code), x.code
		case <-r.d.Interrupts:
			interrupts++
			if interrupts == 1 {
				r.say("stopping the agent (Ctrl-C again to force)")
				stop("interrupted (Ctrl-C)")
				continue
			}
			r.say("forced stop")
			return "interrupted twice (Ctrl-C): forced", -1
		case <-ctx.Done():
			return "cancelled", -1
		case line := <-lines:
			r.answer(ctx, line)
		case <-ev:
			r.poll(ctx)
		case <-tick.C:
			polls++
			if !live.Load() || polls%pollsWhileStreaming == 0 {
				r.poll(ctx)
			}
			if polls%4 == 0 && stopping == "" {
				if why := r.sessionOver(ctx); why != "" {
					r.say("%s: stopping the agent", why)
					stop(why)
				}
			}
		}
	}
}

// pollsWhileStreaming: while the escalation stream is up, the listing is
// still read every this many poll intervals (a safety net).
const pollsWhileStreaming = 10

// watch follows the ops API's escalation event stream: each change is a
// signal on ev (the loop then reads the session's escalations), and so is
// each (re)connection, for what changed while it was down. While the stream
// is down live is false and the loop polls every Options.Poll; it is opened
// again every Options.Reconnect until ctx ends.
func (r *run) watch(ctx context.Context, ev chan<- struct{}, live *atomic.Bool) {
	signal := func() {
		select {
		case ev <- struct{}{}:
		default: // one pending signal is enough
		}
	}
	for ctx.Err() == nil {
		if ch, err := r.d.Ops.WatchEscalations(ctx); err == nil {
			live.Store(true)
			signal()
			for range ch {
				signal()
			}
			live.Store(false)
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.o.Reconnect):
		}
	}
}

// sessionOver says why the session cannot go on ("" while it can).
func (r *run) sessionOver(ctx context.Context) string {
	s, err := r.d.Ops.GetSession(ctx, r.session)
	if err != nil {
		return ""
	}
	if s.Status != "active" {
		return "the session is " + s.Status
	}
	if m := s.Minted; m != nil {
		if m.Budget.MaxToolCalls > 0 && m.ToolCallsUsed >= m.Budget.MaxToolCalls {
			return fmt.Sprintf("the tool-call budget is used up (%d of %d)", m.ToolCallsUsed, m.Budget.MaxToolCalls)
		}
		if m.Budget.MaxCostUSD > 0 && s.LLMCostUSD >= m.Budget.MaxCostUSD {
			return fmt.Sprintf("the cost budget is used up ($%.4f of $%.2f)", s.LLMCostUSD, m.Budget.MaxCostUSD)
		}
	}
	return ""
}

// poll shows new escalations of the session and those decided elsewhere.
func (r *run) poll(ctx context.Context) {
	list, err := r.d.Ops.ListEscalations(ctx, escalation.ListFilter{Session: r.session, Limit: escalation.MaxListLimit})
	if err != nil {
		return
	}
	// Oldest first.
	for i := len(list) - 1; i >= 0; i-- {
		x := list[i]
		prev, known := r.seen[x.ID]
		if known && prev == x.Status {
			continue
		}
		r.seen[x.ID] = x.Status
		switch {
		case !known && x.Status == escalation.StatusPending:
			r.show(x)
			r.queue = append(r.queue, x)
			if len(r.queue) == 1 {
				r.prompt()
			}
		case r.mine[x.ID]:
			r.dequeue(x.ID)
		default:
			where := "elsewhere"
			if !known {
				where = "before it was shown"
			}
			r.say("escalation %s %s by %s (%s)%s", x.ID, x.Status, visible(or(x.DecidedBy, "nobody")), where, reasonText(x.DecisionReason))
			if r.dequeue(x.ID) && len(r.queue) > 0 {
				r.prompt()
			}
		}
	}
}

func reasonText(s string) string {
	if s == "" {
		return ""
	}
	return ": " + visible(s)
}

func (r *run) dequeue(id string) bool {
	for i, q := range r.queue {
		if q.ID == id {
			r.queue = append(r.queue[:i], r.queue[i+1:]...)
			return i == 0
		}
	}
	return false
}

// maxArgsShown bounds the arguments printed for one escalation.
const maxArgsShown = 2048

func (r *run) show(x escalation.Escalation) {
	what := x.Server + "__" + x.Tool
	if x.Kind == escalation.KindEgress {
		what = "egress"
	}
	args := string(x.Args)
	if len(args) > maxArgsShown {
		args = args[:maxArgsShown] + "…"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== escalation %s: %s\n", x.ID, visible(what))
	if x.Resource != "" {
		fmt.Fprintf(&b, "  resource:  %s\n", visible(x.Resource))
	}
	fmt.Fprintf(&b, "  arguments: %s\n", visible(args))
	fmt.Fprintf(&b, "  rule:      %s\n", visible(x.Rule))
	fmt.Fprintf(&b, "  reason:    %s\n", visible(x.Reason))
	_, _ = io.WriteString(r.msg, b.String())
}

func (r *run) prompt() {
	x := r.queue[0]
	r.say("escalation %s waits: a = approve, s = approve similar, d REASON = deny (or decide in the console / CLI)", x.ID)
}

// answer handles one terminal line: an answer to the first waiting
// escalation, else (--interactive) the agent's next turn.
func (r *run) answer(ctx context.Context, line string) {
	line = strings.TrimSpace(line)
	if len(r.queue) == 0 {
		if r.stream.Input != nil {
			if _, err := io.WriteString(r.stream.Input, line+"\n"); err != nil {
				r.say("the agent does not take input: %v", err)
			}
			return
		}
		if line != "" {
			r.say("no escalation is waiting")
		}
		return
	}
	x := r.queue[0]
	verb, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	var approve bool
	var req opsapi.DecideRequest
	switch strings.ToLower(verb) {
	case "a", "approve":
		approve = true
		req.Reason = rest
	case "s", "similar":
		approve = true
		req.Similar = "directory"
		if x.Kind == escalation.KindEgress {
			req.Similar = "domain"
		}
		if rest == "directory" || rest == "domain" || rest == "exact" {
			req.Similar = rest
		}
	case "d", "deny":
		if rest == "" {
			r.say("deny needs a reason: d REASON")
			return
		}
		req.Reason = rest
	default:
		r.say("answer a, s or d REASON for escalation %s", x.ID)
		return
	}
	r.mine[x.ID] = true
	got, err := r.d.Ops.Decide(ctx, x.ID, approve, req)
	if err != nil {
		delete(r.mine, x.ID)
		var ae *opsapi.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			r.say("escalation %s was already decided elsewhere", x.ID)
			r.poll(ctx)
			return
		}
		r.say("deciding %s failed: %v", x.ID, err)
		return
	}
	r.seen[x.ID] = got.Status
	extra := ""
	if req.Similar != "" {
		extra = " (and similar calls: " + req.Similar + ")"
	}
	r.say("escalation %s %s by %s (here)%s%s", x.ID, got.Status, visible(got.DecidedBy), extra, reasonText(got.DecisionReason))
	r.dequeue(x.ID)
	if len(r.queue) > 0 {
		r.prompt()
	}
}

// finish removes the container, revokes the session and prints the summary.
func (r *run) finish(why string, code int64) error {
	err := r.cleanup(why)
	r.summary(why, code)
	return err
}

func (r *run) cleanup(why string) error {
	var errs []error
	if r.stream.Close != nil {
		r.stream.Close()
	}
	if r.container != "" {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		if err := r.d.Docker.Remove(ctx, r.container); err != nil {
			r.say("removing container %s failed: %v (remove it with docker rm -f %s)", shortID(r.container), err, ContainerName(r.session))
			errs = append(errs, fmt.Errorf("removing the container: %w", err))
		}
		cancel()
	}
	if err := removeTokenDir(r.tokenDir); err != nil {
		r.say("removing the token file failed: %v (remove %s by hand)", err, r.tokenDir)
		errs = append(errs, fmt.Errorf("removing the token file: %w", err))
	}
	if r.session != "" {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		if _, err := r.d.Ops.RevokeSession(ctx, r.session, "ironcurtain run ended: "+why); err != nil {
			r.say("revoking session %s failed: %v (revoke it with ironcurtain sessions revoke %s)", r.session, err, r.session)
			errs = append(errs, fmt.Errorf("revoking the session: %w", err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

func (r *run) summary(why string, code int64) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== run summary: session %s\n", r.session)
	fmt.Fprintf(&b, "  ended:       %s after %s\n", why, r.d.Now().Sub(r.started).Round(100*time.Millisecond))
	if s, err := r.d.Ops.GetSession(ctx, r.session); err == nil {
		fmt.Fprintf(&b, "  session:     %s\n", s.Status)
		fmt.Fprintf(&b, "  tool calls:  %d (allowed %d, denied %d, escalated %d)\n", s.ToolCalls, s.Allowed, s.Denied, s.Escalated)
		fmt.Fprintf(&b, "  model:       %d tokens, $%.4f\n", s.LLMTokens, s.LLMCostUSD)
		fmt.Fprintf(&b, "  egress:      %d requests\n", s.EgressRequests)
	} else {
		fmt.Fprintf(&b, "  session:     unknown (%v)\n", err)
	}
	if list, err := r.d.Ops.ListEscalations(ctx, escalation.ListFilter{Session: r.session, Limit: escalation.MaxListLimit}); err == nil {
		fmt.Fprintf(&b, "  escalations: %d\n", len(list))
		for i := len(list) - 1; i >= 0; i-- {
			x := list[i]
			where := "elsewhere"
			if r.mine[x.ID] {
				where = "here"
			}
			if x.DecidedBy == "" {
				where = "undecided"
			}
			fmt.Fprintf(&b, "    %s %s by %s (%s)\n", x.ID, x.Status, visible(or(x.DecidedBy, "nobody")), where)
		}
	}
	if r.d.Verifier != nil {
		if res, err := r.d.Verifier.Verify(ctx, r.session); errors.Is(err, ErrNotVerified) {
			fmt.Fprintf(&b, "  audit:       %v (ironcurtain audit verify --session %s)\n", err, r.session)
		} else if err != nil {
			fmt.Fprintf(&b, "  audit:       verify FAILED: %v\n", err)
		} else {
			fmt.Fprintf(&b, "  audit:       %s\n", res)
		}
	} else {
		fmt.Fprintf(&b, "  audit:       not verified here (ironcurtain audit verify --session %s)\n", r.session)
	}
	switch {
	case r.workspace != "":
		fmt.Fprintf(&b, "  workspace:   %s (on the gateway: %s)\n", r.workspace, r.gwPath)
	case r.gwPath != "":
		fmt.Fprintf(&b, "  workspace:   %s (in the gateway's volume)\n", r.gwPath)
	default:
		fmt.Fprintf(&b, "  workspace:   the gateway's shared sandbox (no session_workspaces.root)\n")
	}
	if code >= 0 {
		fmt.Fprintf(&b, "  exit code:   %d\n", code)
	}
	_, _ = io.WriteString(r.msg, b.String())
}

// visible shows gateway- or agent-written text safely on a terminal:
// control, bidi and invisible characters are escaped.
func visible(s string) string {
	q := strconv.QuoteToGraphic(s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// AgentPrefix starts every line of the agent's output on the terminal: the
// agent is untrusted, and no line it prints can pass for the run's own.
const AgentPrefix = "│ "

// maxAgentLine cuts a line the agent does not end.
const maxAgentLine = 4096

// agentWriter writes the agent's output line by line, prefixed, with
// control, bidi and other invisible characters escaped (no cursor moves,
// screen clears, carriage returns or reordered text).
type agentWriter struct {
	w   io.Writer
	buf []byte
}

func newAgentWriter(w io.Writer) *agentWriter { return &agentWriter{w: w} }

func (a *agentWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			a.buf = append(a.buf, p...)
			if len(a.buf) >= maxAgentLine {
				a.emit()
			}
			break
		}
		a.buf = append(a.buf, p[:i]...)
		a.emit()
		p = p[i+1:]
	}
	return n, nil
}

// Flush writes a last line the agent did not end.
func (a *agentWriter) Flush() {
	if len(a.buf) > 0 {
		a.emit()
	}
}

func (a *agentWriter) emit() {
	var b strings.Builder
	b.WriteString(AgentPrefix)
	for _, r := range string(a.buf) {
		switch {
		case r == '\t' || unicode.IsGraphic(r) && !unicode.Is(unicode.Bidi_Control, r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('\n')
	a.buf = a.buf[:0]
	_, _ = io.WriteString(a.w, b.String())
}
