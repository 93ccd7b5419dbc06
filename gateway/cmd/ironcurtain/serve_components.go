package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/llmrelay"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/external"
	"ironcurtain.dev/gateway/internal/servers/fetch"
	"ironcurtain.dev/gateway/internal/servers/filesystem"
	"ironcurtain.dev/gateway/internal/servers/git"
	"ironcurtain.dev/gateway/internal/servers/github"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/session/minted"
	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
)

// Environment variables of the serve command (secrets never come from flags
// or gateway.yaml).
const (
	envAgentToken    = "IRONCURTAIN_AGENT_TOKEN"    // token of session "agent"
	envOperatorToken = "IRONCURTAIN_OPERATOR_TOKEN" // token of operator "operator"
	envMetricsToken  = "IRONCURTAIN_METRICS_TOKEN"  // metrics token of scraper "metrics" (GET /metrics only)
	defaultSession   = "agent"
	defaultOperator  = "operator"
	defaultScraper   = "metrics"
)

// loadAgentTokens returns session name → agent token, from
// IRONCURTAIN_AGENT_TOKEN and agent.token_files. There may be none: with a
// database, agents may use minted sessions only (withMintedSessions refuses
// to start with neither).
func loadAgentTokens(cfg *config.Config, getenv func(string) string) (map[string]string, error) {
	tokens := map[string]string{}
	if t := getenv(envAgentToken); t != "" {
		tokens[defaultSession] = t
	}
	for _, name := range sortedKeys(cfg.Agent.TokenFiles) {
		if _, dup := tokens[name]; dup {
			return nil, fmt.Errorf("agent.token_files.%s: session %q also gets %s", name, name, envAgentToken)
		}
		t, err := readSecretFile("agent.token_files."+name, cfg.Agent.TokenFiles[name])
		if err != nil {
			return nil, err
		}
		tokens[name] = t
	}
	return tokens, nil
}

func newAuthenticator(tokens map[string]string) (session.Authenticator, error) {
	a, err := session.NewStatic(tokens)
	if err != nil {
		return nil, fmt.Errorf("loading agent tokens: %w", err)
	}
	return a, nil
}

// loadOperators returns the operator tokens, refusing any that is also an
// agent token (an agent that could approve its own escalations has no policy).
func loadOperators(cfg *config.Config, getenv func(string) string, agentTokens map[string]string) (*opsapi.Operators, error) {
	tokens, err := readOpsTokens(getenv(envOperatorToken), defaultOperator, "ops.operator_token_files", cfg.Ops.OperatorTokenFiles)
	if err != nil {
		return nil, err
	}
	ops, err := opsapi.NewOperators(tokens)
	if err != nil {
		return nil, fmt.Errorf("loading operator tokens: %w", err)
	}
	agents := make([]string, 0, len(agentTokens))
	for _, t := range agentTokens {
		agents = append(agents, t)
	}
	if err := ops.RejectAgentTokens(agents...); err != nil {
		return nil, fmt.Errorf("loading operator tokens: %w", err)
	}
	return ops, nil
}

// readOpsTokens returns name → token: fromEnv (when set) as envName, and
// each file of field (name → path).
func readOpsTokens(fromEnv, envName, field string, files map[string]string) (map[string]opsapi.OperatorToken, error) {
	tokens := map[string]opsapi.OperatorToken{}
	if fromEnv != "" {
		tokens[envName] = opsapi.OperatorToken(fromEnv)
	}
	for _, name := range sortedKeys(files) {
		t, err := readSecretFile(field+"."+name, files[name])
		if err != nil {
			return nil, err
		}
		tokens[name] = opsapi.OperatorToken(t)
	}
	return tokens, nil
}

// loadScrapers returns the metrics tokens (nil when none is configured):
// they open GET /metrics only, so each must differ from every agent and
// operator token.
func loadScrapers(cfg *config.Config, getenv func(string) string, agentTokens map[string]string, operators *opsapi.Operators) (*opsapi.Operators, error) {
	tokens, err := readOpsTokens(getenv(envMetricsToken), defaultScraper, "ops.metrics_token_files", cfg.Ops.MetricsTokenFiles)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, nil
	}
	scrapers, err := opsapi.NewScrapers(tokens)
	if err != nil {
		return nil, fmt.Errorf("loading metrics tokens (%s, ops.metrics_token_files): %w", envMetricsToken, err)
	}
	agents := make([]string, 0, len(agentTokens))
	for _, t := range agentTokens {
		agents = append(agents, t)
	}
	if scrapers.RejectAgentTokens(agents...) != nil {
		return nil, errors.New("loading metrics tokens: an agent token is also a metrics token")
	}
	if err := scrapers.RejectOverlap(operators); err != nil {
		return nil, fmt.Errorf("loading metrics tokens: %w (a metrics token must open /metrics only)", err)
	}
	return scrapers, nil
}

// poolConns is how many connections the Postgres pool may open (0 without a database).
func (s *storage) poolConns() int {
	if s.pool == nil {
		return 0
	}
	return int(s.pool.Config().MaxConns)
}

// storage is where records and escalations go.
type storage struct {
	pool      *pgxpool.Pool // nil without a database
	sink      audit.Sink
	escalator escalation.Escalator
	pg        *escalation.PG // nil without a database
	spend     llmrelay.Spend
	minted    *minted.Store // minted sessions (nil without a database): serve_sessions.go
	pgSink    *audit.PGSink // the audit writer (nil without a database): readiness reports its failures
}

// openStorage connects to Postgres (refusing a dirty, missing or newer
// schema) and builds the audit sink and the escalator on it. Without a
// database (database.unsafe_no_database) records go to the JSON-lines file
// only and every escalation is denied.
func openStorage(ctx context.Context, cfg *config.Config, getenv func(string) string, reg prometheus.Registerer, log *slog.Logger, closers *closeStack) (*storage, error) {
	var copySink *audit.JSONL
	argLimits := audit.Limits{MaxValueBytes: cfg.Audit.MaxArgValueBytes, MaxArgsBytes: cfg.Audit.MaxArgsBytes}
	if cfg.Audit.JSONLFile != "" {
		opts := []audit.JSONLOption{audit.ArgLimits(argLimits)}
		if cfg.Audit.JSONLFsync {
			opts = append(opts, audit.Fsync())
		}
		key, err := auditKey(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, audit.MAC(key)) // every line carries an HMAC
		j, err := audit.OpenJSONL(cfg.Audit.JSONLFile, opts...)
		if err != nil {
			return nil, fmt.Errorf("audit.jsonl_file: %w", err)
		}
		closers.push("audit JSON-lines file", j.Close)
		copySink = j
	}
	if cfg.Database.UnsafeNoDatabase {
		if copySink == nil {
			return nil, fmt.Errorf("%s: database.unsafe_no_database needs audit.jsonl_file (records must go somewhere)", cfg.File())
		}
		log.Warn("running WITHOUT a database: escalations are denied, audit goes to the JSON-lines file only", "file", cfg.Audit.JSONLFile)
		return &storage{sink: copySink, escalator: escalation.Deny{}}, nil
	}

	dsn, err := databaseURL(cfg, getenv)
	if err != nil {
		return nil, err
	}
	pool, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	closers.push("database pool", func() error { pool.Close(); return nil })
	if err := store.CheckSchema(ctx, pool); err != nil {
		return nil, err
	}
	spool, err := openSpool(cfg, log)
	if err != nil {
		return nil, err
	}
	closers.push("audit spool", spool.Close)
	pgSink, err := audit.NewPG(pool, audit.Options{
		MaxBatch:    cfg.Audit.MaxBatch,
		QueueSize:   cfg.Audit.QueueSize,
		Linger:      cfg.Audit.Linger,
		Flushers:    cfg.Audit.Flushers,
		Spool:       spool,
		OutcomeWait: cfg.Audit.OutcomeWait,
		ArgLimits:   argLimits,
	}, reg, log.With("component", "audit"))
	if err != nil {
		return nil, fmt.Errorf("building the audit sink: %w", err)
	}
	closers.push("audit sink", pgSink.Close)
	esc, err := escalation.NewPG(pool, escalation.Config{
		Timeout:       cfg.Escalation.Timeout,
		WebhookURL:    cfg.Escalation.WebhookURL,
		PollInterval:  cfg.Escalation.PollInterval,
		SweepInterval: cfg.Escalation.SweepInterval,
	}, reg, log.With("component", "escalation"))
	if err != nil {
		return nil, fmt.Errorf("building the escalator: %w", err)
	}
	closers.push("escalator", esc.Close)

	var sink audit.Sink = pgSink
	if copySink != nil {
		sink = teeSink{primary: pgSink, copy: copySink}
	}
	return &storage{pool: pool, sink: sink, escalator: esc, pg: esc, spend: store.LLMSpend{Pool: pool}, pgSink: pgSink}, nil
}

// openSpool opens the audit spool on the state volume: outcomes the
// database cannot take wait there (fsynced) and are written when it is
// back, also after a restart. A spool that cannot be opened, or is corrupt
// before its last line, stops the start: records must not be lost.
func openSpool(cfg *config.Config, log *slog.Logger) (*audit.Spool, error) {
	dir := cfg.Audit.SpoolPath()
	key, err := auditKey(cfg)
	if err != nil {
		return nil, err
	}
	spool, torn, err := audit.OpenSpoolKey(dir, cfg.Audit.SpoolMaxRecords, key)
	if err != nil {
		return nil, fmt.Errorf("%s: audit.spool_dir: %w", cfg.File(), err)
	}
	if n := spool.Rejected(); n > 0 {
		log.Error("audit spool: refused lines whose MAC does not verify (not written by this gateway, or by a run without audit.spool_key_file); moved aside, not replayed",
			"dir", dir, "lines", n, "file", "outcomes.spool.rejected")
	}
	if torn > 0 {
		log.Warn("audit spool: dropped a last line cut short by a crash (its write never completed)", "dir", dir, "bytes", torn)
	}
	return spool, nil
}

// auditKey is the key of the MACs on the spool's and the JSON-lines
// file's records: audit.spool_key_file, or a key kept in memory only
// (records of an earlier run then cannot be verified, and spooled ones are
// refused on replay).
func auditKey(cfg *config.Config) ([]byte, error) {
	key, err := cfg.Audit.SpoolKey()
	if err != nil {
		return nil, err
	}
	if key == nil {
		key = audit.ProcessSpoolKey()
	}
	return key, nil
}

func databaseURL(cfg *config.Config, getenv func(string) string) (string, error) {
	if cfg.Database.URLFile != "" {
		return readSecretFile("database.url_file", cfg.Database.URLFile)
	}
	if v := getenv(cfg.Database.URLVariable()); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("no database: set %s (or database.url_file in %s); run `ironcurtain migrate up` first", cfg.Database.URLVariable(), cfg.File())
}

// teeSink writes to Postgres, then to the JSON-lines copy. Either failing
// fails the record (and so refuses the action): the operator asked for both.
type teeSink struct {
	primary audit.Sink
	copy    audit.Sink
}

func (t teeSink) Record(ctx context.Context, e audit.Event) error {
	if err := t.primary.Record(ctx, e); err != nil {
		return err
	}
	if err := t.copy.Record(ctx, e); err != nil {
		return fmt.Errorf("writing the audit JSON-lines copy: %w", err)
	}
	return nil
}

// loadPolicy loads the policy directory and, when configured, the shadow
// policy evaluated report-only next to it. Both resolve git remotes with
// gitremote's resolver.
func loadPolicy(cfg *config.Config) (*policy.Engine, error) {
	settings := cfg.PolicySettings()
	remotes := policy.WithRemoteResolver(gitremote.New(gitremote.Options{}))
	eng, err := policy.LoadDir(cfg.PolicyDir, settings, remotes)
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	if cfg.ShadowPolicyDir != "" {
		shadow, err := policy.LoadDir(cfg.ShadowPolicyDir, settings, remotes)
		if err != nil {
			return nil, fmt.Errorf("loading shadow policy: %w", err)
		}
		eng = eng.WithShadow(shadow)
	}
	return eng, nil
}

// buildServers builds the built-in servers and starts the external ones.
func buildServers(ctx context.Context, cfg *config.Config, eng *policy.Engine, sink audit.Sink, getenv func(string) string, m *metrics.ToolCalls, log *slog.Logger, closers *closeStack) ([]servers.Server, error) {
	fsrv, err := filesystem.New(filesystem.Config{Root: cfg.Sandbox, ReadOnlyDirs: cfg.ReadOnlyDirs(), Logger: log.With("server", filesystem.ServerName),
		WorkspaceRoot: cfg.SessionWorkspaces.Root})
	if err != nil {
		return nil, fmt.Errorf("filesystem server: %w", err)
	}
	closers.push("filesystem server", fsrv.Close)

	gitToken := ""
	if cfg.Git.TokenFile == "" {
		gitToken = getenv(cfg.Git.TokenVariable())
	}
	gsrv, err := git.New(git.Config{
		Sink:          sink,
		Sandbox:       cfg.Sandbox,
		WorkspaceRoot: cfg.SessionWorkspaces.Root,
		MirrorDir:     cfg.Git.MirrorPath(),
		Credentials: git.Credentials{
			TokenFile:         cfg.Git.TokenFile,
			Token:             gitToken,
			TokenHosts:        cfg.Git.TokenHosts,
			SSHKeyFile:        cfg.Git.SSHKeyFile,
			SSHKnownHostsFile: cfg.Git.SSHKnownHostsFile,
		},
		PushChecker:    eng.PushChecker(),
		AuthorName:     cfg.Git.AuthorName,
		AuthorEmail:    cfg.Git.AuthorEmail,
		Timeout:        cfg.Git.Timeout,
		NetworkTimeout: cfg.Git.NetworkTimeout,
		MaxScanBytes:   cfg.Secrets.PushLimit(),
		Logger:         log.With("server", git.ServerName),
	})
	if err != nil {
		return nil, fmt.Errorf("git server: %w", err)
	}

	ghToken, err := cfg.GitHub.Token(getenv)
	if err != nil {
		return nil, err
	}
	ghsrv, err := github.New(github.Config{APIURL: cfg.GitHub.APIURL, Token: ghToken, Timeout: cfg.GitHub.Timeout, Logger: log.With("server", github.ServerName), Sink: sink})
	if err != nil {
		return nil, fmt.Errorf("github server: %w", err)
	}

	fetchSrv, err := buildFetch(cfg, sink, log)
	if err != nil {
		return nil, err
	}

	out := []servers.Server{fsrv, gsrv, ghsrv, fetchSrv}
	for _, name := range cfg.ExternalServers() {
		sc := cfg.Servers[name]
		envv, err := sc.LaunchEnv(name, getenv)
		if err != nil {
			return nil, err
		}
		ec := external.Config{
			Name:         name,
			Command:      sc.Command,
			Args:         sc.Args,
			Env:          envv,
			StartTimeout: cfg.MCP.ExternalStartTimeout,
		}
		if err := withLauncher(cfg, name, sc, &ec); err != nil {
			return nil, fmt.Errorf("servers.%s: %w", name, err)
		}
		tr, err := externalTransport(cfg, name, sink, getenv, log) // serve_external.go
		if err != nil {
			return nil, err
		}
		ec.Transport = tr
		ext, err := external.Start(ctx, ec, external.Deps{Logger: log.With("server", name), Metrics: m, Getenv: getenv})
		if err != nil {
			return nil, fmt.Errorf("servers.%s: starting external server: %w", name, err)
		}
		closers.push("external server "+name, ext.Close)
		out = append(out, ext)
	}
	return out, nil
}

// buildFetch builds the fetch server on its own egress guard: the allowlist
// is servers.fetch.allowed_domains, the address rules are the proxy's.
func buildFetch(cfg *config.Config, sink audit.Sink, log *slog.Logger) (*fetch.Server, error) {
	domains := cfg.Servers[fetch.ServerName].AllowedDomains
	if len(domains) == 0 {
		// Without an allowlist the policy engine skips the structural domain
		// check for fetch-url (as the original does), so the compiled rules
		// alone would decide every URL: refuse to start instead.
		return nil, fmt.Errorf(`%s: servers.fetch.allowed_domains: must list the domains the fetch tool may reach without a human (["*"] lets the compiled rules decide every public host)`, cfg.File())
	}
	allow, err := netpolicy.ParsePatterns(domains)
	if err != nil {
		return nil, fmt.Errorf("servers.fetch.allowed_domains: %w", err)
	}
	prefixes, err := cfg.Egress.UnsafePrefixes()
	if err != nil {
		return nil, err
	}
	guard, err := netguard.NewGuard(netguard.GuardConfig{Allow: allow, Addresses: netpolicy.AddressPolicy{UnsafeAllow: prefixes}})
	if err != nil {
		return nil, fmt.Errorf("fetch guard: %w", err)
	}
	srv, err := fetch.New(fetch.Config{
		MaxBodyBytes: cfg.Fetch.MaxBodyBytes,
		MaxRedirects: cfg.Fetch.MaxRedirects,
		Timeout:      cfg.Fetch.Timeout,
		MaxLength:    cfg.Fetch.MaxLength,
		AllowedPorts: cfg.Fetch.AllowedPorts,
		UserAgent:    cfg.Fetch.UserAgent,
	}, fetch.Deps{Guard: guard, Sink: sink, Logger: log.With("server", fetch.ServerName)})
	if err != nil {
		return nil, fmt.Errorf("fetch server: %w", err)
	}
	return srv, nil
}

// writeHealth reports the audit writer's recent failure to write, for
// /readyz (nil when there is no Postgres audit writer).
func writeHealth(st *storage) func() error {
	if st.pgSink == nil {
		return nil
	}
	return func() error { return st.pgSink.WriteFailure(opsapi.WriteHealthWindow) }
}

// buildOps returns the ops API. Without a database only /healthz and the
// operator-protected /metrics are served.
func buildOps(st *storage, operators, scrapers *opsapi.Operators, pol opsapi.PolicyReloader, reg *prometheus.Registry, log *slog.Logger) http.Handler {
	if st.pool != nil {
		return opsapi.New(opsapi.Deps{
			Operators:   operators,
			Scrapers:    scrapers,
			Escalations: st.pg,
			Data:        opsapi.PGData{Pool: st.pool},
			WriteHealth: writeHealth(st),
			Policy:      pol,
			Sessions:    st.minted,
			Watch:       st.pg.Watch,                             // GET /v1/escalations/events
			UI:          consoleHandler(st, operators, pol, log), // serve_console.go
			Gatherer:    reg,
			Registerer:  reg,
			Logger:      log.With("component", "opsapi"),
		})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if !opsapi.MetricsAllowed(operators, scrapers, r) {
			http.Error(w, "operator or metrics token required", http.StatusUnauthorized)
			return
		}
		metricsHandler.ServeHTTP(w, r)
	})
	return mux
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ audit.Sink = teeSink{}
