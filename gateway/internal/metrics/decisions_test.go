package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
)

type recordingSink struct {
	got []audit.Event
	err error
}

func (s *recordingSink) Record(_ context.Context, e audit.Event) error {
	s.got = append(s.got, e)
	return s.err
}

func newTestDecisions(t *testing.T) (*Decisions, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := NewDecisions(reg, netpolicy.MustParsePatterns("github.com", "*.githubusercontent.com"))
	if err != nil {
		t.Fatal(err)
	}
	return d, reg
}

func TestDecisionsCountsWhatTheSinkIsGiven(t *testing.T) {
	d, _ := newTestDecisions(t)
	next := &recordingSink{err: errors.New("database down")}
	sink := d.Sink(next)
	events := []audit.Event{
		&audit.ToolCallDecision{Decision: "allow", Rule: "allow-sandbox-reads"},
		&audit.ToolCallDecision{Decision: "deny", Rule: "structural-unreachable-path"},
		&audit.ToolCallDecision{Decision: "deny", Rule: "structural-unreachable-path"},
		&audit.ToolCallOutcome{Status: "ok"}, // not a decision
		&audit.EgressEvent{Decision: "allow", Rule: "egress.allowed_hosts", Host: "github.com"},
		&audit.EgressEvent{Decision: "allow", Rule: "egress.allowed_hosts", Host: "raw.githubusercontent.com"},
		&audit.EgressEvent{Decision: "deny", Rule: "egress.default_deny", Host: "evil.example"},
		&audit.EgressEvent{Decision: "deny", Rule: "egress.default_deny", Host: "GitHub.COM."}, // canonicalised
		&audit.EgressEvent{Decision: "deny", Rule: "", Host: "not a host"},
	}
	for _, e := range events {
		// The next sink's error is returned as is: counting never changes the outcome.
		if err := sink.Record(context.Background(), e); err == nil || err.Error() != "database down" {
			t.Fatalf("Record = %v, want the next sink's error", err)
		}
	}
	if len(next.got) != len(events) {
		t.Fatalf("the next sink got %d events, want %d", len(next.got), len(events))
	}
	tests := []struct {
		c      prometheus.Collector
		labels []string
		want   float64
	}{
		{d.rules, []string{"tool", "allow", "allow-sandbox-reads"}, 1},
		{d.rules, []string{"tool", "deny", "structural-unreachable-path"}, 2},
		{d.rules, []string{"egress", "allow", "egress.allowed_hosts"}, 2},
		{d.rules, []string{"egress", "deny", "egress.default_deny"}, 2},
		{d.rules, []string{"egress", "deny", "none"}, 1},
		{d.domains, []string{"allow", "github.com"}, 1},
		{d.domains, []string{"allow", "*.githubusercontent.com"}, 1},
		{d.domains, []string{"deny", "github.com"}, 1},
		{d.domains, []string{"deny", "other"}, 2},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.labels, ","), func(t *testing.T) {
			vec := tt.c.(*prometheus.CounterVec)
			if got := testutil.ToFloat64(vec.WithLabelValues(tt.labels...)); got != tt.want {
				t.Errorf("count %v, want %v", got, tt.want)
			}
		})
	}
	if n := testutil.CollectAndCount(d.domains); n != 4 {
		t.Errorf("%d domain series, want 4 (no agent-chosen host is a label value)", n)
	}
}

// TestDecisionsAgentHostsAreNotLabels: a flood of distinct hosts, the way an
// agent would probe or exfiltrate through names, adds no series.
func TestDecisionsAgentHostsAreNotLabels(t *testing.T) {
	d, _ := newTestDecisions(t)
	for i := range 5000 {
		d.Observe(&audit.EgressEvent{Decision: "deny", Rule: "egress.default_deny", Host: fmt.Sprintf("secret-%d.exfil.example", i)})
		d.Observe(&audit.EgressEvent{Decision: "allow", Rule: "egress.allowed_hosts", Host: fmt.Sprintf("chunk-%d.githubusercontent.com", i)})
	}
	if n := testutil.CollectAndCount(d.domains); n != 2 {
		t.Errorf("%d domain series after 10,000 distinct hosts, want 2", n)
	}
}

func TestDecisionsRuleLabelsAreBounded(t *testing.T) {
	d, _ := newTestDecisions(t)
	for i := range MaxRuleLabels + 100 {
		d.Observe(&audit.ToolCallDecision{Decision: "deny", Rule: fmt.Sprintf("rule-%d", i)})
	}
	// A rule admitted before the cap keeps its own label.
	d.Observe(&audit.ToolCallDecision{Decision: "deny", Rule: "rule-0"})
	if got := testutil.ToFloat64(d.rules.WithLabelValues("tool", "deny", "rule-0")); got != 2 {
		t.Errorf("rule-0 counted %v, want 2", got)
	}
	if got := testutil.ToFloat64(d.rules.WithLabelValues("tool", "deny", OtherLabel)); got != 100 {
		t.Errorf("other counted %v, want 100", got)
	}
	if n := testutil.CollectAndCount(d.rules); n != MaxRuleLabels+1 {
		t.Errorf("%d rule series, want %d", n, MaxRuleLabels+1)
	}
	// The secret-egress check keeps its label past the cap: an alert watches it.
	d.Observe(&audit.EgressEvent{Decision: "deny", Rule: policy.RuleSecretEgress, Host: "exfil.example"})
	if got := testutil.ToFloat64(d.rules.WithLabelValues("egress", "deny", policy.RuleSecretEgress)); got != 1 {
		t.Errorf("%s counted %v past the cap, want 1", policy.RuleSecretEgress, got)
	}
}

func TestDecisionsNil(t *testing.T) {
	var d *Decisions
	next := &recordingSink{}
	if s := d.Sink(next); s != audit.Sink(next) {
		t.Errorf("a nil Decisions wraps the sink")
	}
	d.Observe(&audit.ToolCallDecision{Decision: "allow"}) // no panic
}

func TestDecisionsRegisterOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewDecisions(reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDecisions(reg, nil); err == nil {
		t.Errorf("a second registration on one registry succeeded")
	}
}

// FuzzDecisionsDomainLabel: whatever host an agent sends, the label is an
// allowlist entry or "other".
func FuzzDecisionsDomainLabel(f *testing.F) {
	for _, s := range []string{"github.com", "a.githubusercontent.com", "GITHUB.com.", "xn--80ak6aa92e.com", "githubusercontent.com", "", "10.0.0.1", "[::1]", "a..b", "github.com\x00.evil"} {
		f.Add(s)
	}
	d, err := NewDecisions(nil, netpolicy.MustParsePatterns("github.com", "*.githubusercontent.com"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		switch l := d.domainLabel(host); l {
		case "github.com", "*.githubusercontent.com", OtherLabel:
		default:
			t.Fatalf("domainLabel(%q) = %q", host, l)
		}
	})
}

func BenchmarkDecisionsObserve(b *testing.B) {
	d, err := NewDecisions(nil, netpolicy.MustParsePatterns("github.com", "*.githubusercontent.com", "go.dev", "pkg.go.dev"))
	if err != nil {
		b.Fatal(err)
	}
	tool := &audit.ToolCallDecision{Decision: "allow", Rule: "allow-sandbox-reads"}
	egress := &audit.EgressEvent{Decision: "allow", Rule: "egress.allowed_hosts", Host: "objects.githubusercontent.com"}
	b.ReportAllocs()
	b.Run("tool", func(b *testing.B) {
		for b.Loop() {
			d.Observe(tool)
		}
	})
	b.Run("egress", func(b *testing.B) {
		for b.Loop() {
			d.Observe(egress)
		}
	})
}
