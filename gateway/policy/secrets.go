package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/secretscan"
)

// Rule names of the egress invariants (secrets.go).
const (
	// RuleSecretEgress decides a call, request or push that would carry a
	// secret out of the gateway: escalate by default, deny per detector by
	// setting (SecretScan.Deny).
	RuleSecretEgress = "structural-secret-egress"
	// RuleSpecialHost denies a URL whose host is a special-purpose address
	// (loopback, private, link-local, metadata, ...), localhost or a cloud
	// metadata name: the egress guard would refuse it, so no human is asked.
	RuleSpecialHost = "structural-special-host"
)

// SecretScan is the secret-scanning setting (gateway.yaml: secrets). The
// zero value scans with the default detectors and escalates every finding.
type SecretScan struct {
	// Disabled turns scanning off (no finding is ever reported).
	Disabled bool `json:"disabled,omitempty"`
	// Kinds are the detectors to run; nil: secretscan.DefaultKinds.
	Kinds []secretscan.Kind `json:"kinds,omitempty"`
	// Deny lists the kinds whose findings are denied instead of escalated.
	Deny []secretscan.Kind `json:"deny,omitempty"`
	// Exact are the gateway's own secrets (API keys, tokens, agent tokens),
	// matched literally. Never marshalled, logged or shown.
	Exact []secretscan.Secret `json:"-"`
	// TextServers are the servers every string argument of whose tools is
	// scanned (they write where others read: issues, comments, messages).
	// nil: DefaultTextServers. Tools with a github-owner or github-repo
	// argument, and email-body arguments, are scanned on every server.
	TextServers []string `json:"text_servers,omitempty"`
	// PushInspector scans what a push made with the git tool adds (the git
	// server, bound at serve time; pushscan.go). nil: not scanned.
	PushInspector PushInspector `json:"-"`
}

// DefaultTextServers are the servers whose text arguments are scanned when
// SecretScan.TextServers is nil: the built-in github server.
func DefaultTextServers() []string { return []string{"github"} }

// A SecretScanner turns what leaves into decisions: the engine uses it for
// URL-role and text arguments, and the other doors (egress proxy, git
// pushes, the GitHub relay) use the same one (Engine.SecretScanner) so that
// every path decides alike. It is immutable and safe for concurrent use.
type SecretScanner struct {
	det         *secretscan.Detector
	deny        map[secretscan.Kind]bool
	textServers map[string]bool
}

// NewSecretScanner compiles s. Errors name the bad field (kinds, deny,
// exact).
func NewSecretScanner(s SecretScan) (*SecretScanner, error) {
	sc := &SecretScanner{deny: map[secretscan.Kind]bool{}, textServers: map[string]bool{}}
	servers := s.TextServers
	if servers == nil {
		servers = DefaultTextServers()
	}
	for _, srv := range servers {
		sc.textServers[srv] = true
	}
	if s.Disabled {
		return sc, nil
	}
	known := map[secretscan.Kind]bool{}
	for _, k := range secretscan.AllKinds() {
		known[k] = true
	}
	for i, k := range s.Deny {
		if !known[k] {
			return nil, fmt.Errorf("deny[%d]: unknown secret detector %q", i, k)
		}
		sc.deny[k] = true
	}
	var exact []secretscan.Secret
	for _, x := range s.Exact {
		if len(x.Value) >= 8 { // shorter values would match ordinary text
			exact = append(exact, x)
		}
	}
	det, err := secretscan.New(secretscan.Options{Kinds: s.Kinds, Exact: exact})
	if err != nil {
		return nil, fmt.Errorf("kinds: %w", err)
	}
	sc.det = det
	return sc, nil
}

// Detector returns the detector (nil when scanning is disabled: its
// methods then find nothing).
func (s *SecretScanner) Detector() *secretscan.Detector {
	if s == nil {
		return nil
	}
	return s.det
}

// SecretFinding is one secret in a decision: its kind, where it is and the
// masked excerpt. Kind and Where are safe for the audit record and the
// agent; Excerpt is for the operator deciding an escalation only and is
// never marshalled.
type SecretFinding struct {
	Kind    secretscan.Kind `json:"kind"`
	Where   string          `json:"where"`
	Excerpt string          `json:"-"`
}

// maxFindingsShown bounds the findings a decision lists.
const maxFindingsShown = 8

// Decide turns the hits found in what leaves into the structural decision
// (RuleSecretEgress): deny when any hit's kind is denied by setting, else
// escalate. subject says what was scanned ("argument \"url\"", "request
// body", "commit 1a2b3c4 message"); it prefixes every location. ok is false
// when there are no hits. The Reason names kinds and locations only, never
// a value or an excerpt: it is recorded and shown to the agent. The
// operator's text, with the masked excerpts, is Decision.OperatorReason.
func (s *SecretScanner) Decide(subject string, hits []secretscan.Hit) (Decision, bool) {
	if len(hits) == 0 {
		return Decision{}, false
	}
	d := Decision{Status: Escalate, Rule: RuleSecretEgress}
	for _, h := range hits {
		if s != nil && s.deny[h.Kind] {
			d.Status = Deny
		}
		where := h.Where
		if subject != "" {
			where += " of " + subject
		}
		d.Secrets = append(d.Secrets, SecretFinding{Kind: h.Kind, Where: where, Excerpt: h.Excerpt})
	}
	d.Reason = secretReason(d)
	return d, true
}

// secretReason is the recorded reason: kinds and locations.
func secretReason(d Decision) string {
	var b strings.Builder
	b.WriteString("a secret would leave the gateway: ")
	for i, f := range d.Secrets {
		if i == maxFindingsShown {
			fmt.Fprintf(&b, "; and %d more", len(d.Secrets)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(string(f.Kind))
		b.WriteString(" in ")
		b.WriteString(f.Where)
	}
	if d.Status == Deny {
		b.WriteString(" (denied by the secrets setting)")
	} else {
		b.WriteString(" (a human must approve)")
	}
	return b.String()
}

// OperatorReason is what an operator deciding the escalation sees: the
// Reason and, for a secret finding, each masked excerpt with its kind and
// location ("AKIA…MPLE (aws-access-key-id) in query parameter q of
// argument \"url\""). Never record it in the audit log.
func (d Decision) OperatorReason() string {
	if len(d.Secrets) == 0 {
		return d.Reason
	}
	var b strings.Builder
	b.WriteString(d.Reason)
	b.WriteString(" — found: ")
	for i, f := range d.Secrets {
		if i == maxFindingsShown {
			fmt.Fprintf(&b, "; and %d more", len(d.Secrets)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Excerpt)
		b.WriteString(" (")
		b.WriteString(string(f.Kind))
		b.WriteString(") in ")
		b.WriteString(f.Where)
	}
	return b.String()
}

// checkSpecialHosts denies a URL-role value whose host is a special-purpose
// IP literal, localhost or a metadata name that the egress guard would
// refuse (Settings.UnsafeAllowAddresses lets some through, as it does for
// the guard).
func (c *call) checkSpecialHosts() (Evaluation, bool) {
	p := netpolicy.AddressPolicy{UnsafeAllow: c.e.settings.UnsafeAllowAddresses}
	for i := range c.vals {
		if c.rr.kind[i]&argURL == 0 {
			continue
		}
		for _, d := range c.vals[i].domains {
			if err := p.CheckHost(d.host); err != nil {
				var ae *netpolicy.AddressError
				class := "special-purpose"
				if errors.As(err, &ae) {
					class = ae.Class.String()
				}
				name := c.t.ann.Args[i].Name
				return c.deny(RuleSpecialHost,
					fmt.Sprintf("argument %q names host %q, which is not a public destination (%s): it can never be reached", name, d.host.String(), class), err.Error())
			}
		}
	}
	return Evaluation{}, false
}

// maxScanValues bounds the string values of one call that are scanned;
// a call with more is denied (what is not scanned must not leave).
const maxScanValues = 4096

// scanSecrets scans the call's URL-role values (as given and canonical)
// and, on text servers and GitHub tools, every string argument; branch
// names of a tool that contacts a remote too. It returns
// the decision for what it found.
func (c *call) scanSecrets() (Decision, bool) {
	sc := c.e.secrets
	det := sc.Detector()
	if det == nil {
		return Decision{}, false
	}
	textAll := c.t.textServer || c.rr.all&(bitGitHubOwner|bitGitHubRepo) != 0
	// A tool that contacts a remote (a URL-role argument, given or
	// defaulted) sends its branch names there too: a fetch's ref prefixes,
	// a push's destinations. They are scanned as text.
	remote := c.rr.anyURL
	var findings []SecretFinding
	status := Escalate
	add := func(name string, hits []secretscan.Hit) {
		if len(hits) == 0 {
			return
		}
		subject := fmt.Sprintf("argument %q", name) // only when something was found
		if d, ok := sc.Decide(subject, hits); ok {
			findings = append(findings, d.Secrets...)
			if d.Status == Deny {
				status = Deny
			}
		}
	}
	count := 0
	for i, a := range c.t.ann.Args {
		isURL := c.rr.kind[i]&argURL != 0
		text := textAll || c.rr.perArg[i]&bitEmailBody != 0 || (remote && c.rr.perArg[i]&bitBranchName != 0)
		if !isURL && !text {
			continue
		}
		raw := c.arg(i)
		if raw == nil {
			continue
		}
		over := false
		walkStrings(raw, func(s string) {
			if count++; count > maxScanValues {
				over = true
				return
			}
			if isURL {
				add(a.Name, det.ScanURL(s))
			} else {
				add(a.Name, det.ScanText("value", s))
			}
		})
		if over {
			return Decision{Status: Deny, Rule: RuleSecretEgress,
				Reason: fmt.Sprintf("too many values to scan for secrets (more than %d strings in one call)", maxScanValues)}, true
		}
		if isURL && i < len(c.vals) {
			for _, u := range c.vals[i].canon {
				if !containsString(raw, u) {
					add(a.Name, det.ScanURL(u))
				}
			}
		}
	}
	if len(findings) == 0 {
		return Decision{}, false
	}
	findings = dedupeFindings(findings)
	d := Decision{Status: Escalate, Rule: RuleSecretEgress, Secrets: findings}
	if status == Deny {
		d.Status = Deny
	}
	d.Reason = secretReason(d)
	return d, true
}

// walkStrings calls f on every string in a decoded JSON value (object
// keys included).
func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f(k)
			walkStrings(x[k], f)
		}
	}
}

// containsString reports whether the argument value v is or holds s.
func containsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case []any:
		for _, e := range x {
			if str, ok := e.(string); ok && str == s {
				return true
			}
		}
	}
	return false
}

func dedupeFindings(fs []SecretFinding) []SecretFinding {
	seen := map[[2]string]bool{}
	out := fs[:0]
	for _, f := range fs {
		k := [2]string{string(f.Kind), f.Where}
		if !seen[k] {
			seen[k] = true
			out = append(out, f)
		}
	}
	return out
}

// withSecrets combines the decision of the rest of the evaluation with the
// secret decision: a denial stands; otherwise the secret decision decides
// (an escalation for another reason is named in its reason, so that the
// human's approval covers both).
func withSecrets(ev Evaluation, sd Decision) Evaluation {
	if ev.Decision.Status == Deny {
		return ev
	}
	if ev.Decision.Status == Escalate && ev.Decision.Rule != RuleSecretEgress {
		sd.Reason += "; also: " + ev.Decision.Reason
		sd.EscalatedRoles = ev.Decision.EscalatedRoles
	}
	ev.Decision = sd
	return ev
}

// SecretScanner returns the engine's scanner (the other doors decide with
// it, so that a secret is treated alike on every path).
func (e *Engine) SecretScanner() *SecretScanner { return e.secrets }
