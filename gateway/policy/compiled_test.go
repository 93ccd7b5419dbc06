package policy

import (
	"context"
	"strings"
	"testing"
)

// TestCompiledMarksOnlyRuleDecisions: Decision.Compiled (what makes an
// escalation eligible for the auto-approver) is set exactly when a compiled
// rule of the loaded policy decided, over every case of the decision suite;
// structural escalations (a domain outside the server's allowlist) and the
// default deny never carry it.
func TestCompiledMarksOnlyRuleDecisions(t *testing.T) {
	suites := loadSuites(t)
	var compiledEscalations, structuralEscalations int
	for _, name := range sortedKeys(suites) {
		s := suites[name]
		t.Run(name, func(t *testing.T) {
			tr := newTree(t)
			tr.apply(t, s.Setup)
			e := tr.engine(t, s)
			names := map[string]bool{}
			for _, r := range e.rules {
				names[r.name] = true
			}
			for _, c := range s.Cases {
				tr.apply(t, c.Setup)
				server, toolName, _ := strings.Cut(c.Tool, "__")
				args, _ := tr.expandValue(c.Args).(map[string]any)
				d := e.Evaluate(context.Background(), Request{Server: server, Tool: toolName, Args: args}).Decision
				structural := strings.HasPrefix(d.Rule, "structural-") || d.Rule == RuleDefaultDeny ||
					d.Rule == RuleTrustedServer || d.Rule == RuleInternalError
				if d.Compiled == structural || d.Compiled != names[d.Rule] {
					t.Errorf("%s: rule %q (%s): Compiled = %v", c.Name, d.Rule, d.Status, d.Compiled)
				}
				if d.Status == Escalate {
					if d.Compiled {
						compiledEscalations++
					} else {
						structuralEscalations++
					}
				}
			}
		})
	}
	if compiledEscalations == 0 || structuralEscalations == 0 {
		t.Errorf("the suite has %d compiled and %d structural escalations; the test needs both", compiledEscalations, structuralEscalations)
	}
}
