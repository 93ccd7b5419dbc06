package llmrelay

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/llmprovider"
	"ironcurtain.dev/gateway/secretscan"

	"ironcurtain.dev/gateway/internal/promkit"
)

// latencyBuckets are the upstream latency buckets, in seconds: from a
// local model server on loopback to a long non-streamed generation.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Label values used when the model is not in the price table: agent-chosen
// model names never become label values (unbounded cardinality).
const unknownModelLabel = "unknown"

// metrics are the relay's Prometheus metrics. Labels are fixed sets:
// provider, status code, direction, refusal reason, and model as a price
// table key (or "unknown").
type metrics struct {
	requests      *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	cost          *prometheus.CounterVec
	unpriced      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	auditFailures prometheus.Counter
	secrets       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests:      promkit.CounterVec("ironcurtain_relay_requests_total", "Model relay requests by provider and the HTTP status returned to the agent.", "provider", "code"),
		refusals:      promkit.CounterVec("ironcurtain_relay_refusals_total", "Model relay requests refused by the relay itself, by provider and reason (auth, path, method, budget, concurrency, no_key, body, audit, spend_store).", "provider", "reason"),
		tokens:        promkit.CounterVec("ironcurtain_relay_tokens_total", "Model tokens relayed, by provider, model (price-table key or unknown) and direction (input, output).", "provider", "model", "direction"),
		cost:          promkit.CounterVec("ironcurtain_relay_cost_usd_total", "Estimated model cost in US dollars, by provider and model (price-table key).", "provider", "model"),
		unpriced:      promkit.CounterVec("ironcurtain_relay_unpriced_calls_total", "Metered model calls whose model has no price (cost recorded as 0), by provider.", "provider"),
		latency:       promkit.HistogramVec("ironcurtain_relay_upstream_latency_seconds", "Time from sending a request upstream to its response headers, by provider.", latencyBuckets, "provider"),
		auditFailures: promkit.Counter("ironcurtain_relay_audit_failures_total", "Model calls the audit sink failed to store (new model calls are refused until a write succeeds)."),
		secrets:       promkit.CounterVec("ironcurtain_relay_secret_findings_total", "Secrets found in model requests, by detector kind. Model requests are exempt from secret scanning's decision (prompts carry code): counted only.", "kind"),
	}
	// Every kind is exported at 0 from the start, so the first finding is an
	// increase an alert can see.
	for _, k := range secretscan.AllKinds() {
		m.secrets.WithLabelValues(string(k))
	}
	if err := promkit.Register(reg, "relay", "one relay per registry", m.requests, m.refusals, m.tokens, m.cost, m.unpriced, m.latency, m.auditFailures, m.secrets); err != nil {
		return nil, err
	}
	return m, nil
}

// providerLabel keeps agent-chosen path segments out of label values.
func providerLabel(name string) string {
	if name == llmprovider.Anthropic || name == llmprovider.OpenAI {
		return name
	}
	return "unknown"
}

func codeLabel(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code)
}
