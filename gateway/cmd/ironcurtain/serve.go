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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"ironcurtain.dev/gateway/internal/config"
	"ironcurtain.dev/gateway/internal/egress"
	"ironcurtain.dev/gateway/internal/llmrelay"
	"ironcurtain.dev/gateway/internal/mcphub"
	"ironcurtain.dev/gateway/internal/metrics"
)

// Defaults of the serve command.
const (
	defaultConfigPath = "/etc/ironcurtain/gateway.yaml"
	shutdownTimeout   = 20 * time.Second
	readHeaderTimeout = 10 * time.Second
)

// version is stamped at build time (-ldflags "-X main.version=...").
var version = "dev"

func init() {
	commands["serve"] = command{summary: "run the gateway: agent API (/mcp, /llm/), egress proxy, ops API", run: runServe}
}

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
	log := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, *cfgPath, e.getenv, log); err != nil {
		log.Error("gateway stopped", "err", err)
		fmt.Fprintf(e.stderr, "ironcurtain serve: %v\n", err)
		return 1
	}
	return 0
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

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

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

	st, err := openStorage(ctx, cfg, getenv, reg, log, &closers)
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
	log.Info("policy loaded", "dir", cfg.PolicyDir, "rules", eng.RuleCount(), "tools", len(eng.Tools()), "shadow", eng.Shadow() != nil)

	toolMetrics, err := metrics.NewToolCalls(reg)
	if err != nil {
		return fmt.Errorf("registering tool-call metrics: %w", err)
	}
	srvs, err := buildServers(ctx, cfg, eng, st.sink, getenv, toolMetrics, log, &closers)
	if err != nil {
		return err
	}
	hub, err := mcphub.New(mcphub.Config{
		MaxResultBytes:  cfg.MCP.MaxResultBytes,
		CallTimeout:     cfg.MCP.CallTimeout,
		MaxRequestBytes: cfg.MCP.MaxRequestBytes,
		SessionIdleTTL:  cfg.MCP.SessionIdleTTL,
		ProgressEvery:   cfg.MCP.ProgressEvery,
		Version:         version,
	}, mcphub.Deps{
		Servers:   srvs,
		Policy:    eng,
		Escalator: st.escalator,
		Audit:     st.sink,
		Auth:      auth,
		Metrics:   toolMetrics,
		Logger:    log.With("component", "mcphub"),
	})
	if err != nil {
		return fmt.Errorf("building the MCP hub: %w", err)
	}
	log.Info("tools exposed", "count", len(hub.Tools()))

	relayCfg := llmrelay.ConfigFrom(cfg.Relay)
	relayCfg.Prefix = "/llm"
	relayCfg.Getenv = getenv
	relay, err := llmrelay.New(relayCfg, llmrelay.Deps{Auth: auth, Sink: st.sink, Spend: st.spend, Registerer: reg, Logger: log.With("component", "llmrelay")})
	if err != nil {
		return fmt.Errorf("building the model relay: %w", err)
	}
	closers.push("model relay", relay.Close)

	proxyCfg, err := egress.ProxyConfigFrom(&cfg.Egress)
	if err != nil {
		return fmt.Errorf("configuring the egress proxy: %w", err)
	}
	proxy, err := egress.NewProxy(proxyCfg, egress.Deps{Auth: auth, Sink: st.sink, Escalator: st.escalator, Registerer: reg, Logger: log.With("component", "egress")})
	if err != nil {
		return fmt.Errorf("building the egress proxy: %w", err)
	}

	opsHandler := buildOps(st, operators, reg, log)

	apiMux := http.NewServeMux()
	apiMux.Handle("/mcp", hub.Handler())
	apiMux.Handle("/mcp/", hub.Handler())
	apiMux.Handle("/llm/", relay.Handler())
	apiMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})

	apiLn, err := listen("agent.listen", cfg.Agent.ListenAddr())
	if err != nil {
		return err
	}
	proxyLn, err := listen("egress.listen", cfg.Egress.ListenAddr())
	if err != nil {
		apiLn.Close()
		return err
	}
	opsLn, err := listen("ops.listen", cfg.Ops.ListenAddr())
	if err != nil {
		apiLn.Close()
		proxyLn.Close()
		return err
	}
	log.Info("gateway listening", "agent_api", apiLn.Addr().String(), "egress_proxy", proxyLn.Addr().String(), "ops", opsLn.Addr().String(), "version", version)

	apiSrv := &http.Server{Handler: apiMux, ReadHeaderTimeout: readHeaderTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	opsSrv := &http.Server{Handler: opsHandler, ReadHeaderTimeout: readHeaderTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHTTP(apiSrv, apiLn, "agent API") })
	g.Go(func() error { return serveHTTP(opsSrv, opsLn, "ops API") })
	g.Go(func() error {
		if err := proxy.Serve(gctx, proxyLn); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("egress proxy: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		log.Info("gateway shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return errors.Join(
			hub.Shutdown(sctx),
			apiSrv.Shutdown(sctx),
			opsSrv.Shutdown(sctx),
		)
	})
	return g.Wait()
}

func serveHTTP(s *http.Server, ln net.Listener, name string) error {
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func listen(field, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
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
