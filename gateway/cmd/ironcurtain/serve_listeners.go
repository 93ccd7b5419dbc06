package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/doors/egress"
	"ironcurtain.dev/gateway/internal/doors/githttp"
	"ironcurtain.dev/gateway/internal/doors/githubrelay"
	"ironcurtain.dev/gateway/internal/doors/llmrelay"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/netlimit"
)

// Per-request budgets of the two HTTP listeners (netlimit.Deadlines). Long-lived routes are
// long on purpose and bounded by what they wait for; everything else is short.
const (
	bodyBudget     = 30 * time.Second // reading one request body
	shortBudget    = 30 * time.Second // a whole ordinary exchange
	opsQueryBudget = 5 * time.Minute  // an ops response streamed to the operator
	budgetMargin   = 30 * time.Second // above the timeouts a long route waits for
)

// startupLimits raises the open-file limit and warns about every unsafe_ setting that is on.
// It returns the open-file limit in force (0: unknown), which filePlan divides.
func startupLimits(cfg *config.Config, log *slog.Logger) uint64 {
	soft, hard, err := netlimit.RaiseFileLimit()
	if err != nil {
		log.Warn("could not raise the open-file limit", "err", err, "soft", soft, "hard", hard)
	} else {
		log.Info("open-file limit", "soft", soft, "hard", hard)
	}
	for _, s := range cfg.UnsafeSettings() {
		log.Warn("unsafe setting is on", "setting", s)
	}
	warnExposedSecrets(cfg, log) // serve_external.go
	return soft
}

// filePlan fits the connection caps of the agent, ops and egress listeners into the open-file
// limit (netlimit.PlanFiles), keeping a reserve for the Postgres pool (poolConns) and the rest
// of the process; the ops listener is sized first. An agent or egress connection may hold an
// upstream connection too, so it counts twice. A cap it lowers is logged as a warning.
func filePlan(limit uint64, poolConns int, agent, ops *config.ListenerLimits, proxy *egress.ProxyConfig, log *slog.Logger) error {
	pl := proxy.ConnLimits()
	reserve := netlimit.BaseFileReserve + poolConns
	plan, err := netlimit.PlanFiles(limit, reserve, []netlimit.FileDemand{
		{Name: "agent", Limits: netlimit.Limits{MaxConns: agent.MaxConnections, MaxPerClient: agent.MaxConnectionsPerClient}, FilesPerConn: 2},
		{Name: "ops", Limits: netlimit.Limits{MaxConns: ops.MaxConnections, MaxPerClient: ops.MaxConnectionsPerClient}, FilesPerConn: 1, Reserved: true},
		{Name: "egress", Limits: pl, FilesPerConn: 2},
	})
	if err != nil {
		return fmt.Errorf("sizing the listeners: %w", err)
	}
	for _, p := range plan {
		if p.Reduced {
			log.Warn("connection cap lowered to fit the open-file limit", "listener", p.Name, "open_files", limit, "reserve", reserve,
				"max_connections", p.Limits.MaxConns, "max_connections_per_client", p.Limits.MaxPerClient)
		}
	}
	agent.MaxConnections, agent.MaxConnectionsPerClient = plan[0].Limits.MaxConns, plan[0].Limits.MaxPerClient
	ops.MaxConnections, ops.MaxConnectionsPerClient = plan[1].Limits.MaxConns, plan[1].Limits.MaxPerClient
	proxy.MaxConnections, proxy.MaxConnectionsPerClient = plan[2].Limits.MaxConns, plan[2].Limits.MaxPerClient
	log.Info("open-file plan", "open_files", limit, "reserve", reserve,
		"agent_max_connections", agent.MaxConnections, "ops_max_connections", ops.MaxConnections, "egress_max_connections", proxy.MaxConnections)
	return nil
}

// agentBudget bounds each request on the agent API: an MCP call may wait for its tool and a
// human (call timeout + escalation timeout), an event stream lives at most agent.stream_max_duration,
// a model call at most the relay's timeout, a git request the door's timeout plus a call's.
func agentBudget(cfg *config.Config) func(*http.Request) netlimit.Budget {
	callTimeout := orDuration(cfg.MCP.CallTimeout, gate.DefaultCallTimeout)
	escTimeout := orDuration(cfg.Escalation.Timeout, escalation.DefaultTimeout)
	relayTimeout := orDuration(cfg.Relay.Timeout, llmrelay.DefaultTimeout)
	stream := cfg.Agent.StreamMax()
	gitTimeout := orDuration(cfg.Git.HTTP.Timeout, githttp.DefaultTimeout)
	ghTimeout := orDuration(cfg.GitHub.Relay.Timeout, githubrelay.DefaultTimeout)
	return func(r *http.Request) netlimit.Budget {
		switch {
		case r.URL.Path == "/mcp" || strings.HasPrefix(r.URL.Path, "/mcp/"):
			switch r.Method {
			case http.MethodGet:
				return netlimit.Budget{Body: bodyBudget, Total: stream}
			case http.MethodPost:
				return netlimit.Budget{Body: bodyBudget, Total: callTimeout + escTimeout + budgetMargin}
			}
		case strings.HasPrefix(r.URL.Path, "/llm/"):
			return netlimit.Budget{Body: bodyBudget, Total: relayTimeout + budgetMargin}
		case strings.HasPrefix(r.URL.Path, githttp.Prefix):
			// A pack streams in for up to the door's timeout; a push or a fetch
			// may then wait for a human and run upstream (call timeout).
			return netlimit.Budget{Body: gitTimeout, Total: gitTimeout + callTimeout + escTimeout + budgetMargin}
		case githubrelay.Serves(r, cfg.GitHub.Relay.Hosts):
			// A request may wait for a human, then for GitHub (the relay's timeout).
			return netlimit.Budget{Body: bodyBudget, Total: ghTimeout + callTimeout + escTimeout + budgetMargin}
		}
		return netlimit.Budget{Body: bodyBudget, Total: shortBudget}
	}
}

// opsBudget bounds each request on the ops API.
func opsBudget(r *http.Request) netlimit.Budget {
	if strings.HasPrefix(r.URL.Path, "/v1/audit/") || r.URL.Path == "/metrics" {
		return netlimit.Budget{Body: bodyBudget, Total: opsQueryBudget}
	}
	return netlimit.Budget{Body: bodyBudget, Total: shortBudget}
}

func orDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// limitedServer wraps ln in a connection limiter and returns the listener and an
// http.Server with the header and idle timeouts, the per-request deadlines and the
// limiter's connection-state hook; the limiter's counters are exported as metrics.
func limitedServer(name string, ln net.Listener, lim config.ListenerLimits, h http.Handler, budget func(*http.Request) netlimit.Budget, reg prometheus.Registerer, log *slog.Logger) (net.Listener, *http.Server, error) {
	l, err := netlimit.New(netlimit.Limits{MaxConns: lim.MaxConnections, MaxPerClient: lim.MaxConnectionsPerClient})
	if err != nil {
		return nil, nil, err
	}
	labels := prometheus.Labels{"listener": name}
	for _, m := range []struct {
		name, help string
		value      func(netlimit.Stats) float64
		counter    bool
	}{
		{"ironcurtain_listener_connections_open", "Connections open on the listener.", func(s netlimit.Stats) float64 { return float64(s.Open) }, false},
		{"ironcurtain_listener_connections_evicted_total", "Idle connections closed to make room for new ones.", func(s netlimit.Stats) float64 { return float64(s.Evicted) }, true},
		{"ironcurtain_listener_connections_refused_total", "Connections refused because every connection of the listener or client was busy.", func(s netlimit.Stats) float64 { return float64(s.Refused) }, true},
	} {
		value := m.value
		f := func() float64 { return value(l.Stats()) }
		var c prometheus.Collector
		if m.counter {
			c = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help, ConstLabels: labels}, f)
		} else {
			c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.name, Help: m.help, ConstLabels: labels}, f)
		}
		if err := reg.Register(c); err != nil {
			return nil, nil, err
		}
	}
	srv := &http.Server{
		Handler:           netlimit.Deadlines(h, budget),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ConnState:         l.ConnState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listener limits", "listener", name, "max_connections", lim.MaxConnections, "max_connections_per_client", lim.MaxConnectionsPerClient, "idle_timeout", lim.IdleTimeout)
	return l.Listener(ln), srv, nil
}
