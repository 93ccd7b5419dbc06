package egress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/elazarl/goproxy"

	"ironcurtain.dev/gateway/internal/auth"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
)

// refusal is a denial to answer with: status, rule and a short, safe reason.
type refusal struct {
	status int
	rule   string
	reason string
}

// decide runs the checks that do not need the network, in order:
// authentication, audit health, port, IP-literal address, the session's
// tunnel cap, and the host allowlist (deployment, then session approvals,
// then a human if configured). It records the outcome in st and returns nil when
// the request may be dialed.
//
// insp, when not nil, finds the secrets the request would carry out; it
// runs once the host is known to be allowed or escalatable, so a request
// that is refused anyway is not read.
func (p *Proxy) decide(ctx context.Context, r *http.Request, st *reqState, h netpolicy.Host, port int, insp inspector) *refusal {
	st.host, st.port = h, port
	sessID, ref := p.authenticate(ctx, r)
	if ref != nil {
		return p.refuse(st, ref)
	}
	st.session = sessID
	if p.rec.Down() {
		return p.refuse(st, &refusal{http.StatusServiceUnavailable, ruleAudit, "the audit log is unavailable, so egress is paused"})
	}
	if !p.ports[port] {
		return p.refuse(st, &refusal{http.StatusForbidden, rulePorts, "port " + strconv.Itoa(port) + " is not allowed"})
	}
	if h.IsIP() {
		if err := p.guard.CheckAddress(h.Addr()); err != nil {
			return p.refuse(st, addressRefusal(err))
		}
	}
	// The slot is taken before the host decision so that requests waiting
	// for a human count against the cap too; finish gives it back.
	release, ok := p.acquire(sessID)
	if !ok {
		return p.refuse(st, &refusal{http.StatusTooManyRequests, ruleSessionCap,
			"the session already has " + strconv.Itoa(p.cfg.MaxTunnelsPerSession) + " open connections"})
	}
	st.release = release
	rule, reason, ref := p.decideHost(ctx, st, h, port, insp)
	if ref != nil {
		return p.refuse(st, ref)
	}
	st.allow(rule, reason)
	return nil
}

func (p *Proxy) refuse(st *reqState, ref *refusal) *refusal {
	st.deny(ref.rule, ref.reason)
	if ref.rule == ruleAuth && st.session == "" {
		return ref // summarised per source and minute, like its record (authagg.go)
	}
	p.log.Info("egress: refused", "id", st.id, "session", st.session, "host", st.host.String(), "port", st.port,
		"rule", ref.rule, "reason", ref.reason)
	return ref
}

func addressRefusal(err error) *refusal {
	var ae *netpolicy.AddressError
	if errors.As(err, &ae) {
		return &refusal{http.StatusForbidden, ruleAddresses, "the host's address is not public (" + ae.Class.String() + ")"}
	}
	return &refusal{http.StatusForbidden, ruleAddresses, "the host's address is not allowed"}
}

// authenticate reads the agent token from Proxy-Authorization: Basic with
// the token as the password (the user name is ignored), or Bearer.
func (p *Proxy) authenticate(ctx context.Context, r *http.Request) (string, *refusal) {
	tok, err := proxyToken(r.Header)
	switch {
	case errors.Is(err, auth.ErrMissing) && len(r.Header.Values(auth.ProxyAuthorization)) == 0:
		return "", &refusal{http.StatusProxyAuthRequired, ruleAuth, "proxy authentication required"}
	case errors.Is(err, auth.ErrRepeated):
		return "", &refusal{http.StatusProxyAuthRequired, ruleAuth, "several Proxy-Authorization headers"}
	case err != nil:
		return "", &refusal{http.StatusProxyAuthRequired, ruleAuth, "malformed Proxy-Authorization"}
	}
	if srv, ok := p.servers.byToken(tok); ok {
		return ServerSessionPrefix + srv.Name, nil
	}
	s, err := p.auth.Authenticate(ctx, tok)
	if err != nil {
		return "", &refusal{http.StatusProxyAuthRequired, ruleAuth, "unknown agent token"}
	}
	return s.ID, nil
}

// proxyToken is the agent token of the one Proxy-Authorization header of h:
// the Basic password (any user name) or the Bearer token.
func proxyToken(h http.Header) (string, error) {
	return auth.Token(h, auth.ProxyAuthorization, auth.SchemeBasic, auth.SchemeBearer)
}

// decideHost: deployment allowlist, then session approvals, then (if
// configured) a human. It returns the rule and reason of an allow. A
// request that would carry a secret out (insp) is the structural decision
// policy.RuleSecretEgress instead, on a listed host as on one a human is
// asked about.
func (p *Proxy) decideHost(ctx context.Context, st *reqState, h netpolicy.Host, port int, insp inspector) (string, string, *refusal) {
	if srv, ok := p.serverOf(st.session); ok {
		return p.decideServerHost(st, srv, h, insp)
	}
	rule, reason, listed := "", "", false
	if pat, ok := p.guard.AllowedBy(h); ok {
		rule, reason, listed = ruleAllowlist+"["+pat.String()+"]", "host is in the allowlist", true
	} else if p.approvals != nil && p.approvals.Allowed(st.session, h, port) {
		rule, reason, listed = ruleApproval, "a human approved this host for the session", true
	} else {
		p.mu.Lock()
		r, ok := p.approved[approvalKey{st.session, h, port}]
		p.mu.Unlock()
		if ok {
			rule, reason, listed = r, "a human approved this host for the session", true
		}
	}
	if !listed && !p.cfg.EscalateUnknownHosts {
		return "", "", &refusal{http.StatusForbidden, ruleAllowlist, "host " + h.String() + " is not in the allowlist"}
	}
	if sc := p.scanner(); insp != nil && sc.Detector() != nil {
		hits, err := insp(sc.Detector(), listed)
		if err != nil {
			st.fail(err)
			return "", "", &refusal{http.StatusBadRequest, policy.RuleSecretEgress, errNoScan.Error()}
		}
		if len(hits) > 0 {
			return p.decideSecrets(ctx, st, sc, h, port, hits, listed)
		}
	}
	if listed {
		return rule, reason, nil
	}
	return p.escalate(ctx, st, h, port)
}

type approvalKey struct {
	session string
	host    netpolicy.Host
	port    int
}

// pendingEscalation lets concurrent requests for the same session, host and
// port wait for one human decision instead of raising one escalation each.
type pendingEscalation struct {
	done chan struct{}
	rule string
	ref  *refusal
}

// escalate holds the request until a human decides. An approval is kept for
// the session, host and port for the life of the proxy; a denial, an expiry
// or an escalator error refuses only this request (fail closed).
func (p *Proxy) escalate(ctx context.Context, st *reqState, h netpolicy.Host, port int) (string, string, *refusal) {
	key := approvalKey{st.session, h, port}
	p.mu.Lock()
	if rule, ok := p.approved[key]; ok {
		p.mu.Unlock()
		return rule, "a human approved this host for the session", nil
	}
	pe, waiting := p.pending[key]
	if !waiting {
		pe = &pendingEscalation{done: make(chan struct{})}
		p.pending[key] = pe
	}
	p.mu.Unlock()
	ctx, stop := watchClient(ctx) // an agent that hangs up withdraws its question
	defer stop()

	if !waiting {
		pe.rule, pe.ref = p.askHuman(ctx, st, h, port)
		p.mu.Lock()
		if pe.ref == nil {
			p.approved[key] = pe.rule
		}
		delete(p.pending, key)
		p.mu.Unlock()
		close(pe.done)
	} else {
		select {
		case <-pe.done:
		case <-ctx.Done():
			return "", "", &refusal{http.StatusForbidden, ruleEscalation, "the request ended before a human decided"}
		}
	}
	if pe.ref != nil {
		return "", "", pe.ref
	}
	return pe.rule, "a human approved this host for the session", nil
}

func (p *Proxy) askHuman(ctx context.Context, st *reqState, h netpolicy.Host, port int) (string, *refusal) {
	args, _ := json.Marshal(map[string]any{"host": h.String(), "port": port, "kind": st.kind})
	res, err := p.escalator.Escalate(ctx, escalation.Request{
		CallID:    st.id,
		SessionID: st.session,
		Kind:      "egress",
		Args:      args,
		Rule:      ruleEscalation,
		Reason:    "egress to " + h.HostPort(port) + ", a host not in the allowlist",
		Resource:  h.String(),
	})
	if err != nil {
		st.fail(err)
		p.log.Warn("egress: escalation failed", "id", st.id, "error", err.Error())
		return "", &refusal{http.StatusForbidden, ruleEscalation, "host " + h.String() + " is not in the allowlist and no human decision could be obtained"}
	}
	if !res.Approved {
		reason := "a human denied egress to " + h.String()
		if res.Status != "" && res.Status != "denied" {
			reason = "the request for egress to " + h.String() + " was " + res.Status
		}
		return "", &refusal{http.StatusForbidden, ruleEscalation, reason}
	}
	rule := "escalation " + res.ID
	if res.DecidedBy != "" {
		rule += " approved by " + res.DecidedBy
	}
	return rule, nil
}

// acquire takes one of the session's connection slots.
func (p *Proxy) acquire(sessID string) (func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perSess[sessID] >= p.cfg.MaxTunnelsPerSession {
		return nil, false
	}
	p.perSess[sessID]++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.perSess[sessID]--; p.perSess[sessID] <= 0 {
			delete(p.perSess, sessID)
		}
	}, true
}

// refusalResponse is the plain-text answer to a refused request. The text
// names the host, the rule and the reason; it never contains a token, an
// address the agent did not give, or an internal error.
func refusalResponse(r *http.Request, st *reqState, ref *refusal) *http.Response {
	target := "request"
	if !st.host.IsZero() {
		target = st.host.HostPort(st.port)
	}
	body := "ironcurtain egress: " + target + " refused: " + ref.reason + " (rule: " + ref.rule + ")\n"
	resp := goproxy.NewResponse(r, "text/plain; charset=utf-8", ref.status, body)
	resp.TransferEncoding = nil
	if ref.status == http.StatusProxyAuthRequired {
		resp.Header.Add("Proxy-Authenticate", `Basic realm="ironcurtain egress"`)
		resp.Header.Add("Proxy-Authenticate", `Bearer realm="ironcurtain egress"`)
	}
	resp.Header.Set("X-Ironcurtain-Rule", ref.rule)
	resp.Header.Set("Connection", "close")
	resp.Close = true
	return resp
}
