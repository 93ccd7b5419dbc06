package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"

	"ironcurtain.dev/gateway/internal/promkit"
)

// Label values of Decisions for what is not named one by one.
const (
	// OtherLabel stands for a rule past MaxRuleLabels, and for an egress host
	// that no allowed_hosts entry matches.
	OtherLabel = "other"
	// MaxRuleLabels bounds the distinct rule label values: rules come from
	// the compiled policy and the gateway's own checks (a few dozen), never
	// from the agent, but a huge policy must not make a huge metric.
	MaxRuleLabels = 256
)

// Decisions counts the decisions every door records, by the rule that made
// them (ironcurtain_decisions_by_rule_total{door,decision,rule}), and the
// egress decisions by domain (ironcurtain_egress_by_domain_total{decision,domain}).
// It counts at the audit sink, so every door that records a decision (the MCP
// hub, the git door, the GitHub relay, the fetch tool, the egress proxy) is
// counted the same way, whatever its path.
//
// The domain label is the egress.allowed_hosts entry the host matches
// ("github.com", "*.githubusercontent.com"), or "other": the hosts an agent
// asks for never become label values (unbounded cardinality, and a way to
// write into the operator's dashboards). Which other hosts were asked for is
// in the audit trail (the egress_by_domain view).
//
// A nil *Decisions counts nothing.
type Decisions struct {
	rules   *prometheus.CounterVec
	domains *prometheus.CounterVec
	allowed []netpolicy.Pattern

	mu   sync.Mutex
	seen map[string]bool // rule label values admitted so far
}

// NewDecisions creates the metrics and registers them on reg (nil: not
// registered). allowedHosts are the egress allowlist's patterns.
func NewDecisions(reg prometheus.Registerer, allowedHosts []netpolicy.Pattern) (*Decisions, error) {
	d := &Decisions{
		rules:   promkit.CounterVec("ironcurtain_decisions_by_rule_total", "Decisions recorded, by door (tool: a tool call of any door; egress: the egress proxy and fetch), decision (allow, deny, escalate) and the rule or check that made it (\"other\" past 256 rules).", "door", "decision", "rule"),
		domains: promkit.CounterVec("ironcurtain_egress_by_domain_total", "Egress decisions recorded (proxy and fetch), by decision and by the egress.allowed_hosts entry the host matches (\"other\" when none does).", "decision", "domain"),
		allowed: allowedHosts,
		seen:    map[string]bool{},
	}
	if err := promkit.Register(reg, "decision", "", d.rules, d.domains); err != nil {
		return nil, err
	}
	return d, nil
}

// Sink returns next with every decision it is given counted first.
func (d *Decisions) Sink(next audit.Sink) audit.Sink {
	if d == nil {
		return next
	}
	return decisionSink{d: d, next: next}
}

type decisionSink struct {
	d    *Decisions
	next audit.Sink
}

func (s decisionSink) Record(ctx context.Context, e audit.Event) error {
	s.d.Observe(e)
	return s.next.Record(ctx, e)
}

// Observe counts e when it is a decision (a tool call's or an egress one).
func (d *Decisions) Observe(e audit.Event) {
	if d == nil {
		return
	}
	switch ev := e.(type) {
	case *audit.ToolCallDecision:
		d.rules.WithLabelValues("tool", ev.Decision, d.ruleLabel(ev.Rule)).Inc()
	case *audit.EgressEvent:
		d.rules.WithLabelValues("egress", ev.Decision, d.ruleLabel(ev.Rule)).Inc()
		d.domains.WithLabelValues(ev.Decision, d.domainLabel(ev.Host)).Inc()
	}
}

// ruleLabel admits the first MaxRuleLabels distinct rules as themselves.
// The secret-egress check (a gateway constant, alerted on) is always
// itself, however many rules came first.
func (d *Decisions) ruleLabel(rule string) string {
	if rule == "" {
		return "none"
	}
	if rule == policy.RuleSecretEgress {
		return rule
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[rule] {
		return rule
	}
	if len(d.seen) >= MaxRuleLabels {
		return OtherLabel
	}
	d.seen[rule] = true
	return rule
}

// domainLabel is the allowlist entry host matches, or OtherLabel.
func (d *Decisions) domainLabel(host string) string {
	h, err := netpolicy.ParseHost(host)
	if err != nil {
		return OtherLabel
	}
	if p, ok := netpolicy.FirstMatch(d.allowed, h); ok {
		return p.String()
	}
	return OtherLabel
}
