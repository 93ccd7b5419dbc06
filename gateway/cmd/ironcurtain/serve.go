package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"ironcurtain.dev/gateway/buildinfo"
	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/cli"
	"ironcurtain.dev/gateway/internal/doors/egress"
	"ironcurtain.dev/gateway/internal/doors/llmrelay"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/memlimit"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/procguard"
	"ironcurtain.dev/gateway/internal/tracing"
)

// Defaults of the serve command.
const (
	defaultConfigPath = cli.DefaultConfigPath
	readHeaderTimeout = 10 * time.Second
)

// Stop budget. Docker and Compose send SIGKILL 10 s after SIGTERM, so a stop
// must finish well within that: calls waiting for a human are answered at
// once, calls running on a server get shutdownGrace, the listeners and the
// hub get shutdownTimeout in all (then open connections are closed), and
// the egress proxy drains for at most shutdownGrace. Closing the stores
// (audit flush, pool) follows; compose sets stop_grace_period above this.
const (
	shutdownGrace   = gate.DefaultShutdownGrace
	shutdownTimeout = 7 * time.Second
)

// version is the build's version (gateway/buildinfo).
var version = buildinfo.Get().Version

func runServe(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfgPath := fs.String("config", defaultConfigPath, "path of gateway.yaml")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(e.stderr, "ironcurtain serve: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level}))) // trace_id in lines logged inside a span
	if err := guardProcess(log); err != nil {
		log.Error("gateway stopped", "err", err)
		fmt.Fprintf(e.stderr, "ironcurtain serve: %v\n", err)
		return 1
	}
	if err := serve(ctx, *cfgPath, e.getenv, log); err != nil {
		log.Error("gateway stopped", "err", err)
		fmt.Fprintf(e.stderr, "ironcurtain serve: %v\n", err)
		return 1
	}
	return 0
}

// guardProcess makes the gateway non-dumpable before it reads a secret or starts a child, so a
// child of its uid cannot read /proc/<gateway>/environ, mem or fd/ (docs/operations.md). Where
// the platform has no such flag it logs and carries on; a failure on Linux stops the gateway.
func guardProcess(log *slog.Logger) error {
	switch err := procguard.NonDumpable(); {
	case err == nil:
		log.Info("process is non-dumpable: children cannot read its /proc entries")
	case errors.Is(err, procguard.ErrUnsupported):
		log.Warn("process stays dumpable on this platform: a child of the gateway's uid can read its /proc entries", "err", err)
	default:
		return fmt.Errorf("making the process non-dumpable: %w", err)
	}
	return nil
}

// serve builds every component (store → policy → audit → escalation →
// servers → hub → relay → egress → ops), runs the three listeners until ctx
// ends and shuts down in reverse.
func serve(ctx context.Context, cfgPath string, getenv func(string) string, log *slog.Logger) (err error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	var closers closeStack
	defer func() { err = errors.Join(err, closers.close(log)) }()
	openFiles := startupLimits(cfg, log)
	// GOMEMLIMIT from the container's memory limit (unless set).
	memlimit.Apply(getenv, log)
	if err := startTracing(ctx, getenv, log, &closers); err != nil { // serve_tracing.go
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), metrics.BuildInfo(buildinfo.Get()))

	tokens, err := loadAgentTokens(cfg, getenv)
	if err != nil {
		return err
	}
	auth, err := newAuthenticator(tokens)
	if err != nil {
		return err
	}
	operators, err := loadOperators(cfg, getenv, tokens)
	if err != nil {
		return err
	}
	scrapers, err := loadScrapers(cfg, getenv, tokens, operators)
	if err != nil {
		return err
	}

	st, err := openStorage(ctx, cfg, getenv, reg, log, &closers)
	if err != nil {
		return err
	}
	if err := startAutoApprover(ctx, cfg, getenv, st, reg, log, &closers); err != nil {
		return err
	}
	if st.sink, err = decisionMetrics(cfg, reg, st.sink); err != nil { // serve_metrics.go
		return err
	}
	if auth, err = withMintedSessions(auth, tokens, st); err != nil { // serve_sessions.go
		return err
	}
	if err := startSessionWorkspaces(ctx, cfg, st, log, &closers); err != nil { // serve_sessions.go
		return err
	}

	if err := setGatewaySecrets(cfg, getenv, tokens, log); err != nil {
		return err
	}
	scan, err := doorSecrets(cfg) // serve_secretscan.go
	if err != nil {
		return err
	}
	eng, err := loadPolicy(cfg)
	if err != nil {
		return err
	}
	for _, w := range eng.Warnings() {
		log.Warn("policy", "warning", w)
	}
	if rb := eng.Rebase(); rb.Moved() || !rb.Recorded {
		log.Info("policy sandbox", "compiled_for", rb.From, "recorded", rb.Recorded, "sandbox", rb.To, "rules_rebased", rb.Rules, "detail", rb.String())
	}
	log.Info("policy loaded", "dir", cfg.PolicyDir, "rules", eng.RuleCount(), "tools", len(eng.Tools()), "annotation_files", eng.AnnotationFiles(), "shadow", eng.Shadow() != nil)
	live, err := livePolicy(cfg, eng, reg, log) // serve_policy.go
	if err != nil {
		return err
	}

	proxyCfg, err := egress.ProxyConfigFrom(&cfg.Egress)
	if err != nil {
		return fmt.Errorf("configuring the egress proxy: %w", err)
	}
	if proxyCfg.DrainTimeout == 0 || proxyCfg.DrainTimeout > shutdownGrace {
		if proxyCfg.DrainTimeout > shutdownGrace {
			log.Warn("egress.drain_timeout exceeds the stop budget; using the shutdown grace", "configured", proxyCfg.DrainTimeout, "used", shutdownGrace)
		}
		proxyCfg.DrainTimeout = shutdownGrace
	}
	proxyCfg.MaxScanBodyBytes = cfg.Secrets.ProxyBodyLimit()
	agentLimits, opsLimits := cfg.Agent.AgentLimits(), cfg.Ops.OpsLimits()
	if err := filePlan(openFiles, st.poolConns(), &agentLimits, &opsLimits, &proxyCfg, log); err != nil { // serve_listeners.go
		return err
	}
	if proxyCfg.Servers, err = serverIdentities(cfg); err != nil {
		return err
	}
	proxy, err := egress.NewProxy(proxyCfg, egress.Deps{Auth: auth, Sink: st.sink, Escalator: st.escalator, Secrets: scan, Registerer: reg, Logger: log.With("component", "egress")})
	if err != nil {
		return fmt.Errorf("building the egress proxy: %w", err)
	}
	// The proxy listens and serves before any external server starts: an
	// image server dials it as soon as it runs (its first request at boot).
	proxyLn, err := listenWith(egress.ListenConfig(), "egress.listen", cfg.Egress.ListenAddr())
	if err != nil {
		return err
	}
	proxyRun := serveEarly(ctx, "egress proxy", func(ctx context.Context) error { return proxy.Serve(ctx, proxyLn) }, &closers)

	toolMetrics, err := metrics.NewToolCalls(reg)
	if err != nil {
		return fmt.Errorf("registering tool-call metrics: %w", err)
	}
	srvs, err := buildServers(ctx, cfg, eng, st.sink, getenv, toolMetrics, log, &closers)
	if err != nil {
		return err
	}
	scan.bind(srvs)
	loop, err := loopGuard(cfg, reg, st.pool) // serve_loopbreaker.go
	if err != nil {
		return err
	}
	hub, err := mcphub.New(mcphub.Config{
		MaxResultBytes:  cfg.MCP.MaxResultBytes,
		CallTimeout:     cfg.MCP.CallTimeout,
		MaxRequestBytes: cfg.MCP.MaxRequestBytes,
		SessionIdleTTL:  cfg.MCP.SessionIdleTTL,
		ProgressEvery:   cfg.MCP.ProgressEvery,
		ShutdownGrace:   shutdownGrace,
		Version:         version,
		// issue 24 items 12 and 13 (zero: the hub's defaults)
		MaxSessions:         cfg.MCP.MaxSessions,
		MaxSessionsPerToken: cfg.MCP.MaxSessionsPerToken,
		MaxCallsInFlight:    cfg.MCP.MaxCallsInFlight,
	}, mcphub.Deps{
		Servers:   srvs,
		Policy:    live,
		Escalator: st.escalator,
		Audit:     st.sink,
		Auth:      auth,
		Metrics:   toolMetrics,
		LoopGuard: loop,
		Logger:    log.With("component", "mcphub"),
	})
	if err != nil {
		return fmt.Errorf("building the MCP hub: %w", err)
	}
	log.Info("tools exposed", "count", len(hub.Tools()))

	relayCfg := llmrelay.ConfigFrom(cfg.Relay)
	relayCfg.Prefix = "/llm"
	relayCfg.Getenv = getenv
	relay, err := llmrelay.New(relayCfg, llmrelay.Deps{Auth: auth, Sink: st.sink, Secrets: scan, Spend: st.spend, Registerer: reg, Logger: log.With("component", "llmrelay")})
	if err != nil {
		return fmt.Errorf("building the model relay: %w", err)
	}
	closers.push("model relay", relay.Close)

	opsHandler := buildOps(st, operators, scrapers, live, reg, log)

	apiMux := http.NewServeMux()
	apiMux.Handle("/mcp", hub.Handler())
	apiMux.Handle("/mcp/", hub.Handler())
	apiMux.Handle("/llm/", relay.Handler())
	door, err := gitDoor(cfg, eng, hub.Gate(), srvs, auth, st.sink, log)
	if err != nil {
		return err
	}
	if door != nil {
		apiMux.Handle(gitDoorPrefix, door)
	}
	ghRelay, err := githubRelay(cfg, hub.Gate(), srvs, auth, st.sink, getenv, log)
	if err != nil {
		return err
	}
	if ghRelay != nil {
		for _, p := range ghRelay.Patterns() {
			apiMux.Handle(p, ghRelay)
		}
	}
	apiMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})

	apiLn, err := listen("agent.listen", cfg.Agent.ListenAddr())
	if err != nil {
		return err
	}
	opsLn, err := listen("ops.listen", cfg.Ops.ListenAddr())
	if err != nil {
		apiLn.Close()
		return err
	}
	log.Info("gateway listening", "agent_api", apiLn.Addr().String(), "egress_proxy", proxyLn.Addr().String(), "ops", opsLn.Addr().String(), "version", version, "revision", buildinfo.Get().Revision, "go", buildinfo.Get().GoVersion)

	apiLimited, apiSrv, err := limitedServer("agent", apiLn, agentLimits, apiMux, agentBudget(cfg), reg, log)
	var opsLimited net.Listener
	var opsSrv *http.Server
	if err == nil {
		opsLimited, opsSrv, err = limitedServer("ops", opsLn, opsLimits, opsHandler, opsBudget, reg, log)
	}
	if err != nil {
		apiLn.Close()
		opsLn.Close()
		return fmt.Errorf("limiting the listeners: %w", err)
	}
	apiLn, opsLn = apiLimited, opsLimited

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHTTP(apiSrv, apiLn, "agent API") })
	g.Go(func() error { reloadOnSIGHUP(gctx, live); return nil })
	g.Go(func() error { return serveHTTP(opsSrv, opsLn, "ops API") })
	g.Go(func() error {
		if err := proxyRun.until(gctx); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("egress proxy: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		return shutdown(log, st.pg, hub, apiSrv, opsSrv)
	})
	return g.Wait()
}

// earlyRun is a component served before the rest of the gateway is built
// (the egress proxy: external servers dial it as they start).
type earlyRun struct {
	stop context.CancelFunc
	done chan struct{}
	err  error
}

// serveEarly runs run in the background until its context (ctx, or stop)
// ends; serve's closers stop it and wait for it when serve returns before
// the listeners run (a later step failed).
func serveEarly(ctx context.Context, name string, run func(context.Context) error, closers *closeStack) *earlyRun {
	ctx, cancel := context.WithCancel(ctx)
	e := &earlyRun{stop: cancel, done: make(chan struct{})}
	go func() { defer close(e.done); e.err = run(ctx) }()
	closers.push(name, func() error { e.stop(); <-e.done; return nil })
	return e
}

// until waits for e to end on its own, or stops it when ctx ends, and
// returns its error.
func (e *earlyRun) until(ctx context.Context) error {
	select {
	case <-e.done:
	case <-ctx.Done():
		e.stop()
		<-e.done
	}
	return e.err
}

// shutdown stops the agent API, the hub and the ops API together within
// shutdownTimeout: the escalator and the hub stop every wait for a human at
// once (the escalations stay pending for the next gateway; the calls answer
// the agent and record their outcome), the listeners stop accepting, running
// calls get the hub's grace; whatever is still open at the deadline is
// closed.
func shutdown(log *slog.Logger, esc *escalation.PG, hub *mcphub.Hub, servers ...*http.Server) error {
	begin := time.Now()
	log.Info("gateway shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if esc != nil {
		_ = esc.Close() // egress requests waiting for a human end now too
	}
	errs := make([]error, len(servers)+1)
	var wg sync.WaitGroup
	wg.Add(len(errs))
	go func() { defer wg.Done(); errs[0] = hub.Shutdown(ctx) }()
	for i, s := range servers {
		go func() { defer wg.Done(); errs[i+1] = s.Shutdown(ctx) }()
	}
	wg.Wait()
	if ctx.Err() != nil {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	log.Info("gateway listeners closed", "took", time.Since(begin).Round(time.Millisecond))
	return errors.Join(errs...)
}

func serveHTTP(s *http.Server, ln net.Listener, name string) error {
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func listen(field, addr string) (net.Listener, error) {
	return listenWith(net.ListenConfig{}, field, addr)
}

func listenWith(lc net.ListenConfig, field, addr string) (net.Listener, error) {
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listening on %s: %w", field, addr, err)
	}
	return ln, nil
}

// closeStack closes what was opened, last first.
type closeStack struct {
	names []string
	fns   []func() error
}

func (c *closeStack) push(name string, fn func() error) {
	c.names = append(c.names, name)
	c.fns = append(c.fns, fn)
}

func (c *closeStack) close(log *slog.Logger) error {
	var errs []error
	for i := len(c.fns) - 1; i >= 0; i-- {
		if err := c.fns[i](); err != nil {
			log.Warn("closing", "component", c.names[i], "err", err)
			errs = append(errs, fmt.Errorf("closing %s: %w", c.names[i], err))
		}
	}
	c.names, c.fns = nil, nil
	return errors.Join(errs...)
}

// readSecretFile reads a one-line secret; the content is never part of an error.
func readSecretFile(field, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: reading %s: %w", field, path, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", field, path)
	}
	return s, nil
}
