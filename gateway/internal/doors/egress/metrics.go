package egress

import (
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/secretscan"

	"ironcurtain.dev/gateway/internal/promkit"
)

// dialBuckets are the buckets of the dial latency histogram, in seconds
// (DNS lookup plus TCP connect): from 100 µs on loopback to the 10 s default
// connect timeout.
var dialBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// metrics are the proxy's Prometheus metrics. Label values are fixed sets
// (kind, decision, direction, reason), never host names or session ids.
type metrics struct {
	requests      *prometheus.CounterVec
	active        prometheus.Gauge
	bytes         *prometheus.CounterVec
	dial          prometheus.Histogram
	auditFailures prometheus.Counter
	authFailures  prometheus.Counter
	secrets       *prometheus.CounterVec

	// The children every tunnel's end updates, looked up once (a
	// CounterVec lookup hashes its label values on every call).
	up, down prometheus.Counter
	finished map[[2]string]prometheus.Counter // kind, decision
}

// finishedCounter is requests{kind, decision}.
func (m *metrics) finishedCounter(kind, decision string) prometheus.Counter {
	if c, ok := m.finished[[2]string{kind, decision}]; ok {
		return c
	}
	return m.requests.WithLabelValues(kind, decision)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests:      promkit.CounterVec("ironcurtain_egress_requests_total", "Egress proxy requests and CONNECT tunnels by kind (connect, http) and final decision (allow, deny).", "kind", "decision"),
		active:        promkit.Gauge("ironcurtain_egress_active_tunnels", "CONNECT tunnels and plain HTTP requests the egress proxy is relaying now."),
		bytes:         promkit.CounterVec("ironcurtain_egress_bytes_total", "Bytes relayed by the egress proxy, by direction (up: agent to internet, down: internet to agent).", "direction"),
		dial:          promkit.Histogram("ironcurtain_egress_dial_duration_seconds", "Time to resolve a checked host and connect to a checked address.", dialBuckets),
		auditFailures: promkit.Counter("ironcurtain_egress_audit_failures_total", "Egress events the audit sink failed to store (new egress is refused until a write succeeds)."),
		authFailures:  promkit.Counter("ironcurtain_egress_auth_failures_total", "Proxy requests without a valid agent token (recorded as one audit row per source per minute)."),
		secrets:       promkit.CounterVec("ironcurtain_egress_secret_findings_total", "Secrets found in what the egress proxy was asked to send (host names, plain-HTTP URLs, headers, bodies), by detector kind.", "kind"),
	}
	m.up, m.down = m.bytes.WithLabelValues("up"), m.bytes.WithLabelValues("down")
	m.finished = map[[2]string]prometheus.Counter{}
	for _, k := range []string{"connect", "http"} {
		for _, d := range []string{decisionAllow, decisionDeny} {
			m.finished[[2]string{k, d}] = m.requests.WithLabelValues(k, d)
		}
	}
	// Every kind is exported at 0 from the start, so the first finding is an
	// increase an alert can see.
	for _, k := range append(secretscan.AllKinds(), KindUnscannedBody) {
		m.secrets.WithLabelValues(string(k))
	}
	if err := promkit.Register(reg, "egress", "one proxy per registry", m.requests, m.active, m.bytes, m.dial, m.auditFailures, m.authFailures, m.secrets); err != nil {
		return nil, err
	}
	return m, nil
}

// secretFindings counts hits by kind (a fixed set: the detectors).
func (m *metrics) secretFindings(hits []secretscan.Hit) {
	for _, h := range hits {
		m.secrets.WithLabelValues(string(h.Kind)).Inc()
	}
}
