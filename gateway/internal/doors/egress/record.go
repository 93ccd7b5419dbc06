package egress

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/netpolicy"
)

// Decision values written to audit.EgressEvent.Decision.
const (
	decisionAllow = "allow"
	decisionDeny  = "deny"
)

// Rules named in decisions and denial messages.
const (
	ruleAuth       = "egress.auth"
	ruleRequest    = "egress.request"
	ruleAllowlist  = "egress.allowed_hosts"
	rulePorts      = "egress.allowed_ports"
	ruleAddresses  = "egress.addresses"
	ruleSessionCap = "egress.max_tunnels_per_session"
	ruleSNI        = "egress.sni"
	ruleApproval   = "session approval"
	ruleEscalation = "egress.escalate_unknown_hosts"
	ruleAudit      = "audit"
	ruleCatchAll   = "egress.default_deny"
	ruleShutdown   = "egress.shutdown"
	ruleDial       = "egress.dial" // the upstream could not be reached (not a policy decision)
)

// recordTimeout bounds one audit write at the end of a request (the
// aggregated auth failures'; a request's own record: gate.Recorder).
const recordTimeout = gate.RecordTimeout

// reqState follows one proxied request or tunnel from arrival to its audit
// event. The handler goroutine owns most fields; the ones written from
// other goroutines (dial, relay) are guarded by mu or atomic.
type reqState struct {
	id     string
	start  time.Time
	kind   string // connect | http
	method string
	client string // the client's address (IP), for aggregated auth failures

	session string
	host    netpolicy.Host
	port    int
	// rawHost is a CONNECT's host as it arrived (before mapping and
	// lower-casing): what the secret scan read, and what the TLS server name
	// may be besides the canonical form (sniMatches).
	rawHost string

	allowed bool // the host decision allowed it; only then may it be dialed
	release func()
	// finishers run when the request ends (the handler goroutine only).
	finishers []func()
	// detached: a tunnel's relay went on on its own goroutine, which now
	// owns the state and ends it (Proxy.end); set by hijack before the
	// handler returns.
	detached bool
	// scanDigest is the SHA-256 of what the secret scan read (secrets.go).
	scanDigest string
	// hostShown, when set, is the host as the audit event records it: a
	// secret found in the host name's labels is not stored (shownHost).
	hostShown string

	mu       sync.Mutex
	decision string
	rule     string
	reason   string
	errText  string
	resolved netip.Addr

	up, down atomic.Int64

	// span follows the request or tunnel (trace.go); traceID is its trace
	// when sampled, for the audit event.
	span    trace.Span
	traceID string
}

type stateKey struct{}

func withState(ctx context.Context, st *reqState) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey{}).(*reqState)
	return st
}

func newState(kind, method string) *reqState {
	return &reqState{id: uuid.NewString(), start: time.Now(), kind: kind, method: method, decision: decisionDeny, rule: ruleCatchAll, reason: "no rule allowed this request"}
}

func (st *reqState) allow(rule, reason string) {
	st.mu.Lock()
	st.allowed = true
	st.decision, st.rule, st.reason = decisionAllow, rule, reason
	st.mu.Unlock()
}

// deny records a denial; a later denial (address check after the host
// decision, SNI mismatch) replaces an earlier allow.
func (st *reqState) deny(rule, reason string) {
	st.mu.Lock()
	st.allowed = false
	st.decision, st.rule, st.reason = decisionDeny, rule, reason
	st.mu.Unlock()
}

// onFinish runs f when the request ends (after its response).
func (st *reqState) onFinish(f func()) { st.finishers = append(st.finishers, f) }

func (st *reqState) fail(err error) {
	st.mu.Lock()
	if st.errText == "" && err != nil {
		st.errText = err.Error()
	}
	st.mu.Unlock()
}

func (st *reqState) setResolved(a netip.Addr) {
	st.mu.Lock()
	st.resolved = a
	st.mu.Unlock()
}

func (st *reqState) isAllowed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.allowed
}

// recordedHost is the host the audit event names (st.mu held).
func (st *reqState) recordedHost() string {
	if st.hostShown != "" {
		return st.hostShown
	}
	return st.host.String()
}

func (st *reqState) event() *audit.EgressEvent {
	st.mu.Lock()
	defer st.mu.Unlock()
	ev := audit.NewEgressEvent(audit.EgressFields{
		ID: st.id, SessionID: st.session, TraceID: st.traceID, Time: st.start,
		Kind: st.kind, Method: st.method, Host: st.recordedHost(), Port: st.port,
	})
	ev.Decision, ev.Reason, ev.Rule, ev.Error = st.decision, st.reason, st.rule, st.errText
	ev.BytesUp, ev.BytesDown, ev.Duration = st.up.Load(), st.down.Load(), time.Since(st.start)
	if st.resolved.IsValid() {
		ev.ResolvedIP = st.resolved.String()
	}
	return ev
}

// finish writes the request's audit event and updates the metrics. A failed
// write marks the sink unhealthy: new egress is then refused until a write
// (of a refusal, for instance) succeeds again.
// clientHost is the IP of a RemoteAddr.
func clientHost(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

func (p *Proxy) finish(st *reqState) {
	if st.release != nil {
		st.release()
	}
	for _, f := range st.finishers {
		f()
	}
	ev := st.event()
	endSpan(st.span, ev)
	p.metrics.finishedCounter(ev.Kind, ev.Decision).Inc()
	if ev.Rule == ruleAuth && ev.SessionID == "" {
		// No session: a stranger or a misconfigured client. Counted, and written as one
		// row per source per minute (runAuthFlusher), never one row per request.
		p.metrics.authFailures.Inc()
		p.authFails.add(st.client, ev.Reason, st.start)
		return
	}
	p.metrics.up.Add(float64(ev.BytesUp))
	p.metrics.down.Add(float64(ev.BytesDown))
	if err := p.rec.Record(ev); err != nil { // a failure refuses new egress (gate.Recorder)
		p.metrics.auditFailures.Inc()
		// Keep the event in the log so it is not lost altogether.
		b, _ := json.Marshal(ev)
		p.log.Error("egress: recording audit event failed; refusing new egress until the audit sink recovers",
			slog.String("error", err.Error()), slog.String("event", string(b)))
		return
	}
}
