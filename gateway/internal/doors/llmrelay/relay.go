package llmrelay

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/llmprovider"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/tracing"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultPrefix                  = "/llm"
	DefaultMaxBodyBytes            = 32 << 20 // the Messages API's own request limit
	DefaultTimeout                 = 10 * time.Minute
	DefaultStreamIdleTimeout       = 2 * time.Minute
	DefaultMaxConcurrentPerSession = 8
	// DefaultConnectTimeout bounds DNS plus TCP connect (and the TLS
	// handshake) to the upstream.
	DefaultConnectTimeout = 10 * time.Second
)

// Config configures the relay. Zero values take the defaults above.
type Config struct {
	// Prefix is the path the handler is mounted at ("/llm"): requests are
	// <Prefix>/anthropic/<path> and <Prefix>/openai/<path>, with the
	// prefix still in the URL (mount without stripping it).
	Prefix    string
	Anthropic llmprovider.ProviderConfig
	OpenAI    llmprovider.ProviderConfig
	// MaxBodyBytes caps a request body (413 beyond).
	MaxBodyBytes int64
	// Timeout bounds a whole call, streamed response included.
	Timeout time.Duration
	// StreamIdleTimeout aborts a call whose upstream pauses this long
	// within its response body. (The wait for response headers, which for
	// a non-streamed call lasts the whole generation, is bounded by
	// Timeout.)
	StreamIdleTimeout time.Duration
	// MaxConcurrentPerSession caps a session's calls in flight (429 beyond).
	MaxConcurrentPerSession int
	// Budget applies to every session not in SessionBudgets.
	Budget Budget
	// SessionBudgets replace Budget for the named sessions (by session ID).
	SessionBudgets map[string]Budget
	// Prices add to or override llmprovider.DefaultPrices, keyed by model
	// prefix.
	Prices map[string]llmprovider.Price
	// UnsafeAllowServerTools lets requests use provider-side tools that
	// reach the network (web search and fetch, remote MCP servers), which
	// bypass the egress proxy's allowlist.
	UnsafeAllowServerTools bool
	// Getenv reads the API keys (os.Getenv when nil). Keys are read once,
	// by New.
	Getenv func(string) string
}

// Deps are the relay's collaborators. Auth and Sink are required.
type Deps struct {
	Auth session.Authenticator
	Sink audit.Sink
	// Spend seeds each session's spend (nil: spend starts at zero).
	Spend Spend
	// Secrets, when set, counts the secrets model requests carry
	// (secrets.go; never blocks).
	Secrets    SecretSource
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Tracer starts a span per relayed call (optional; nil: package
	// tracing's, a no-op unless OTEL_* variables turned traces on).
	Tracer trace.Tracer
}

// Relay is the model relay. It is safe for concurrent use.
type Relay struct {
	prefix      string
	providers   map[string]*provider
	maxBody     int64
	timeout     time.Duration
	idleTimeout time.Duration
	// unsafeServerTools: see Config.UnsafeAllowServerTools.
	unsafeServerTools bool
	bodyTimeout       time.Duration // reading a request body

	auth      session.Authenticator
	rec       *gate.Recorder // writes each call's record; Down: refuse new calls
	secrets   SecretSource
	ledger    *ledger
	prices    *llmprovider.PriceTable
	metrics   *metrics
	log       *slog.Logger
	tracer    trace.Tracer
	transport *http.Transport
}

// New builds a Relay. API keys are read from the environment here; a
// missing key is not an error (calls to that provider get a 503 naming the
// variable) but is logged.
func New(cfg Config, deps Deps) (*Relay, error) {
	if deps.Auth == nil {
		return nil, errors.New("creating model relay: no authenticator")
	}
	if deps.Sink == nil {
		return nil, errors.New("creating model relay: no audit sink")
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	r := &Relay{
		prefix:      strings.TrimRight(orDefault(cfg.Prefix, DefaultPrefix), "/"),
		providers:   map[string]*provider{},
		maxBody:     orDefault(cfg.MaxBodyBytes, DefaultMaxBodyBytes),
		timeout:     orDefault(cfg.Timeout, DefaultTimeout),
		idleTimeout: orDefault(cfg.StreamIdleTimeout, DefaultStreamIdleTimeout),

		unsafeServerTools: cfg.UnsafeAllowServerTools,
		bodyTimeout:       bodyReadTimeout,
		auth:              deps.Auth,
		rec:               gate.NewRecorder(deps.Sink),
		secrets:           deps.Secrets,
		ledger:            newLedger(cfg.Budget, cfg.SessionBudgets, deps.Spend, orDefault(cfg.MaxConcurrentPerSession, DefaultMaxConcurrentPerSession)),
		prices:            llmprovider.NewPriceTable(cfg.Prices),
		log:               log,
		tracer:            deps.Tracer,
	}
	if !strings.HasPrefix(r.prefix, "/") {
		return nil, fmt.Errorf("creating model relay: prefix %q must start with /", cfg.Prefix)
	}
	for _, pc := range []struct {
		name      string
		cfg       llmprovider.ProviderConfig
		endpoints map[string]endpoint
	}{
		{llmprovider.Anthropic, cfg.Anthropic, anthropicEndpoints},
		{llmprovider.OpenAI, cfg.OpenAI, openAIEndpoints},
	} {
		p, err := newProvider(pc.name, pc.cfg, pc.endpoints, getenv)
		if err != nil {
			return nil, fmt.Errorf("creating model relay: %w", err)
		}
		if !p.up.Keyless() && p.up.Key() == "" {
			log.Warn("llmrelay: no API key; calls to this provider will be refused until the variable is set",
				slog.String("provider", p.up.Provider), slog.String("variable", p.up.KeyEnv))
		}
		r.providers[p.up.Provider] = p
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, fmt.Errorf("creating model relay: %w", err)
	}
	r.metrics = m
	dialer := &net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}
	r.transport = &http.Transport{
		// Direct: the relay is the gateway's own egress to the configured
		// model host, never through a proxy from the environment.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    DefaultConnectTimeout,
		ExpectContinueTimeout:  time.Second,
		ResponseHeaderTimeout:  r.timeout,
		MaxResponseHeaderBytes: 1 << 20,
	}
	if r.tracer == nil {
		r.tracer = tracing.Tracer(tracerScope)
	}
	return r, nil
}

// ConfigFrom converts the relay section of gateway.yaml (already
// validated by the config package).
func ConfigFrom(c config.RelayConfig) Config {
	out := Config{
		Anthropic:               providerFrom(c.Anthropic),
		OpenAI:                  providerFrom(c.OpenAI),
		MaxBodyBytes:            c.MaxBodyBytes,
		Timeout:                 c.Timeout,
		StreamIdleTimeout:       c.StreamIdleTimeout,
		MaxConcurrentPerSession: c.MaxConcurrentPerSession,
		UnsafeAllowServerTools:  c.UnsafeAllowServerTools,
		Budget:                  Budget{MaxTokens: c.Budget.MaxTokens, MaxCostUSD: c.Budget.MaxCostUSD},
	}
	if len(c.SessionBudgets) > 0 {
		out.SessionBudgets = make(map[string]Budget, len(c.SessionBudgets))
		for k, b := range c.SessionBudgets {
			out.SessionBudgets[k] = Budget{MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD}
		}
	}
	if len(c.Prices) > 0 {
		out.Prices = make(map[string]llmprovider.Price, len(c.Prices))
		for k, p := range c.Prices {
			pr := llmprovider.NewPrice(p.InputPerMTok, p.OutputPerMTok)
			if p.CacheWritePerMTok != nil {
				pr.CacheWritePerMTok = *p.CacheWritePerMTok
			}
			if p.CacheReadPerMTok != nil {
				pr.CacheReadPerMTok = *p.CacheReadPerMTok
			}
			out.Prices[k] = pr
		}
	}
	return out
}

func providerFrom(p config.RelayProvider) llmprovider.ProviderConfig {
	pc := llmprovider.ProviderConfig{BaseURL: p.BaseURL, UnsafeAllowHTTPWithKey: p.UnsafeAllowHTTPWithKey}
	if p.APIKeyEnv != nil {
		if *p.APIKeyEnv == "" {
			pc.Keyless = true
		} else {
			pc.APIKeyEnv = *p.APIKeyEnv
		}
	}
	return pc
}

// Handler returns the relay's HTTP handler, to mount at Prefix + "/"
// (the request path keeps the prefix).
func (r *Relay) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = r.countSecrets(req.Body)
		}
		r.serve(w, req)
	})
}

// Close releases idle upstream connections.
func (r *Relay) Close() error {
	r.transport.CloseIdleConnections()
	return nil
}

// Spent returns a session's spend as the relay knows it (tokens and
// estimated US dollars), for reports and tests.
func (r *Relay) Spent(sessionID string) (tokens int64, costUSD float64) {
	return r.ledger.spent(sessionID)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
