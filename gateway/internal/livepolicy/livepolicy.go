// Package livepolicy holds the policy the gateway decides with and replaces
// it while the gateway runs (hot reload: SIGHUP and POST /v1/policy/reload).
//
// The policy is one immutable *policy.Engine (compiled policy, dynamic
// lists, tool annotations, shadow policy and settings, with its content
// version) behind an atomic pointer. A reload builds and validates a whole
// new engine first and swaps the pointer only when it loaded: a failed
// reload keeps the old policy and says why (the returned error, a log line,
// ironcurtain_policy_reloads_total{result="failed"}). The MCP hub takes one
// snapshot per call (mcphub.Snapshotter), so a call in flight finishes, and
// is recorded, under the policy it started with.
//
// The deployment settings (gateway.yaml) are not re-read: a reload re-reads
// the policy artifacts with the settings the gateway started with. The set
// of tools the hub exposes is fixed at start; a reload that annotates a new
// tool does not expose it, and a tool whose annotation is removed is denied
// (structural-unknown-tool).
package livepolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/policy"
)

// Loader loads and validates a complete policy (policy.LoadDir plus the
// shadow policy). It must not return a nil engine without an error.
type Loader func() (*policy.Engine, error)

// Reload results (label values of ironcurtain_policy_reloads_total).
const (
	ResultChanged   = "changed"   // a new version is in force
	ResultUnchanged = "unchanged" // the artifacts loaded and hash the same
	ResultFailed    = "failed"    // the load failed; the old policy stays
)

// Policy is the policy in force. Its methods are safe for concurrent use.
type Policy struct {
	cur  atomic.Pointer[policy.Engine]
	load Loader
	mu   sync.Mutex // serialises reloads
	log  *slog.Logger
	now  func() time.Time

	info    *prometheus.GaugeVec
	reloads *prometheus.CounterVec
	seconds prometheus.Histogram
}

// New returns the policy holder with initial in force. reg may be nil (no
// metrics registered); log may be nil.
func New(initial *policy.Engine, load Loader, reg prometheus.Registerer, log *slog.Logger) (*Policy, error) {
	if initial == nil || load == nil {
		return nil, errors.New("creating the live policy: an initial policy and a loader are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Policy{
		load: load, log: log, now: time.Now,
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ironcurtain_policy_info",
			Help: "The policy in force: always 1, labelled with its version (content hash of the compiled policy, annotations, dynamic lists, decision settings and shadow policy; tool_calls.policy_version).",
		}, []string{"version"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_policy_reloads_total",
			Help: "Policy reloads (SIGHUP, POST /v1/policy/reload) by result: changed, unchanged, failed (the old policy stays in force).",
		}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ironcurtain_policy_reload_duration_seconds",
			Help:    "Time to load and validate the policy artifacts on a reload, successful or not.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{p.info, p.reloads, p.seconds} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering policy metrics: %w", err)
			}
		}
	}
	for _, r := range []string{ResultChanged, ResultUnchanged, ResultFailed} {
		p.reloads.WithLabelValues(r)
	}
	p.cur.Store(initial)
	p.info.WithLabelValues(initial.Version()).Set(1)
	return p, nil
}

// Snapshot returns the engine in force. Decide a whole call with one
// snapshot (mcphub.Snapshotter).
func (p *Policy) Snapshot() *policy.Engine { return p.cur.Load() }

// Version returns the version in force.
func (p *Policy) Version() string { return p.cur.Load().Version() }

// Annotation implements mcphub.Policy on the engine in force.
func (p *Policy) Annotation(server, tool string) (policy.ToolAnnotation, bool) {
	return p.cur.Load().Annotation(server, tool)
}

// Evaluate implements mcphub.Policy on the engine in force.
func (p *Policy) Evaluate(ctx context.Context, r policy.Request) policy.Evaluation {
	return p.cur.Load().Evaluate(ctx, r)
}

// EvaluateWirePush implements mcphub.WirePolicy on the engine in force.
func (p *Policy) EvaluateWirePush(ctx context.Context, w policy.WirePush) policy.Evaluation {
	return p.cur.Load().EvaluateWirePush(ctx, w)
}

// Result describes one reload.
type Result struct {
	// Result is ResultChanged, ResultUnchanged or ResultFailed.
	Result string `json:"result"`
	// Version is the version in force after the reload (the old one when
	// it failed); Previous the one before.
	Version  string `json:"version"`
	Previous string `json:"previous"`
	// Rules and Tools describe the policy in force.
	Rules  int  `json:"rules"`
	Tools  int  `json:"tools"`
	Shadow bool `json:"shadow"`
	// Warnings are the new policy's load-time warnings.
	Warnings []string `json:"warnings,omitempty"`
	// Error says why a failed reload failed (the file and JSON path of the
	// problem, as `ironcurtain policy check` prints it).
	Error string `json:"error,omitempty"`
	// Duration is the time the load and validation took.
	Duration time.Duration `json:"duration_ns"`
	// Source says what asked for the reload (signal, ops API and operator).
	Source string `json:"source"`
}

// Reload loads the policy again and, when it loads, puts it in force. On
// failure the old policy stays in force and the error says why. source
// names who asked (for the log). Reloads are serialised.
func (p *Policy) Reload(ctx context.Context, source string) (Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.cur.Load()
	res := Result{Previous: old.Version(), Source: source}
	if err := ctx.Err(); err != nil {
		return p.failed(res, old, fmt.Errorf("reloading policy: %w", err))
	}
	begin := p.now()
	e, err := p.load()
	res.Duration = p.now().Sub(begin)
	p.seconds.Observe(res.Duration.Seconds())
	if err == nil && e == nil {
		err = errors.New("the loader returned no policy")
	}
	if err != nil {
		return p.failed(res, old, fmt.Errorf("reloading policy: %w", err))
	}
	res.Version, res.Rules, res.Tools, res.Shadow, res.Warnings = e.Version(), e.RuleCount(), len(e.Tools()), e.Shadow() != nil, e.Warnings()
	if res.Version == res.Previous {
		res.Result = ResultUnchanged
		p.reloads.WithLabelValues(ResultUnchanged).Inc()
		p.log.Info("policy reloaded: unchanged", "version", res.Version, "source", source, "took", res.Duration)
		return res, nil
	}
	p.cur.Store(e)
	p.info.WithLabelValues(res.Version).Set(1)
	p.info.DeleteLabelValues(res.Previous)
	res.Result = ResultChanged
	p.reloads.WithLabelValues(ResultChanged).Inc()
	for _, w := range res.Warnings {
		p.log.Warn("policy", "warning", w, "version", res.Version)
	}
	p.log.Info("policy reloaded", "version", res.Version, "previous", res.Previous, "rules", res.Rules, "tools", res.Tools,
		"shadow", res.Shadow, "source", source, "took", res.Duration)
	return res, nil
}

func (p *Policy) failed(res Result, old *policy.Engine, err error) (Result, error) {
	res.Result, res.Version, res.Error = ResultFailed, old.Version(), err.Error()
	res.Rules, res.Tools, res.Shadow = old.RuleCount(), len(old.Tools()), old.Shadow() != nil
	p.reloads.WithLabelValues(ResultFailed).Inc()
	p.log.Error("policy reload failed; the previous policy stays in force", "version", res.Version, "source", res.Source, "err", err)
	return res, err
}

// OnSignal reloads on every value received from sig (SIGHUP) until ctx
// ends. Signals that arrive during a reload coalesce into one more reload.
func (p *Policy) OnSignal(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sig:
			// The outcome is logged and counted by Reload.
			_, _ = p.Reload(ctx, "signal "+s.String())
		}
	}
}
