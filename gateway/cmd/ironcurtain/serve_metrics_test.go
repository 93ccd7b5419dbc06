package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"ironcurtain.dev/gateway/internal/store/pgtest"
	"ironcurtain.dev/gateway/internal/testenv"
)

// The observability artefacts (compose/observability, docs/observability.md)
// are checked against a live gateway: promtool checks the alert rules and runs
// their unit tests, a gateway started here serves real traffic, promtool
// checks its /metrics, and every metric and label a dashboard panel or an
// alert names must be in that output, so that neither can rot when a metric
// is renamed.
const (
	obsDir       = "../../../compose/observability"
	obsRules     = obsDir + "/prometheus/ironcurtain.rules.yml"
	obsRulesTest = obsDir + "/prometheus/ironcurtain.rules.test.yml"
	obsConfig    = obsDir + "/prometheus/prometheus.yml"
	obsDashboard = obsDir + "/grafana/dashboards/ironcurtain.json"
)

// promtool returns the path of promtool (Debian's prometheus package,
// scripts/prereqs.sh). In CI a missing promtool fails the test.
func promtool(t *testing.T) string {
	t.Helper()
	return testenv.Require(t, "promtool")
}

func runPromtool(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestObservabilityRulesCheck(t *testing.T) {
	out := runPromtool(t, nil, "check", "rules", obsRules)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}
	runPromtool(t, nil, "test", "rules", obsRulesTest)
	runPromtool(t, nil, "check", "config", "--syntax-only", obsConfig)
}

// fakeAnthropic answers every request like the Messages API, with usage.
func fakeAnthropic(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":3}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runObservedGateway starts serve on a migrated database with the model relay
// and the auto-approver pointed at a fake, keyless Anthropic (whose answer
// the auto-approver reads as malformed: every escalation still goes to a
// human), and an external MCP server whose tool has no pin.
func runObservedGateway(t *testing.T, db *pgtest.DB, sandbox, policyDir string) servedGateway {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g := servedGateway{api: freeAddr(t), proxy: freeAddr(t), ops: freeAddr(t)}
	cfg := fmt.Sprintf(`sandbox: %s
policy_dir: %s
servers:
  fetch:
    allowed_domains: [example.com]
  notes:
    command: %s
    env:
      %s: serve
escalation:
  auto_approver:
    enabled: true
    provider: anthropic
    model: claude-sonnet-4-5
agent:
  listen: %s
egress:
  listen: %s
  allowed_hosts: [github.com, "*.githubusercontent.com"]
ops:
  listen: %s
git:
  mirror_dir: %s
audit:
  spool_dir: %s
relay:
  anthropic:
    base_url: %s
    api_key_env: ""
`, sandbox, policyDir, exe, obsMCPServerVar, g.api, g.proxy, g.ops, filepath.Join(dir, "mirror"), filepath.Join(dir, "spool"), fakeAnthropic(t))
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"IRONCURTAIN_DATABASE_URL":   db.DSN,
		"IRONCURTAIN_AGENT_TOKEN":    testAgentToken,
		"IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken,
		"IRONCURTAIN_METRICS_TOKEN":  testMetricsToken,
		"PATH":                       os.Getenv("PATH"),
	}
	serveUntilReady(t, cfgPath, func(k string) string { return env[k] }, slog.New(slog.NewJSONHandler(io.Discard, nil)), "http://"+g.api+"/healthz")
	return g
}

// driveTraffic sends what makes every labelled metric of the dashboards
// appear: allowed, denied and escalated tool calls (one decided by an
// operator), proxy requests with and without a token, model calls with and
// without a token.
func driveTraffic(t *testing.T, g servedGateway, db *pgtest.DB, sandbox string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(sandbox, "a.txt"), []byte("note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := connectAgent(t, g.api)
	if r := <-callAsync(agent, "filesystem__read_text_file", map[string]any{"path": filepath.Join(sandbox, "a.txt")}); r.err != nil || r.isError {
		t.Fatalf("allowed read: %+v", r)
	}
	if r := <-callAsync(agent, "filesystem__read_text_file", map[string]any{"path": "/etc/hostname"}); r.err != nil || !r.isError {
		t.Fatalf("read outside the sandbox: %+v, want a refusal", r)
	}
	waiting := callAsync(agent, "filesystem__move_file", map[string]any{"source": filepath.Join(sandbox, "a.txt"), "destination": filepath.Join(sandbox, "b.txt")})
	opsDecide(t, g.ops, pendingEscalation(t, db), "deny")
	if r := <-waiting; r.err != nil || !r.isError {
		t.Fatalf("denied escalation: %+v", r)
	}

	for _, auth := range []string{"", "Proxy-Authorization: Basic " + basicAuth("agent", testAgentToken) + "\r\n"} {
		conn, err := net.DialTimeout("tcp", g.proxy, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "CONNECT exfil.example:443 HTTP/1.1\r\nHost: exfil.example:443\r\n%s\r\n", auth)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if !strings.Contains(line, " 407 ") && !strings.Contains(line, " 403 ") {
			t.Fatalf("proxy answered %q, want a refusal", line)
		}
	}

	for _, key := range []string{testAgentToken, "not-a-token-of-this-gateway-000"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.api+"/llm/anthropic/v1/messages",
			strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 401}[key == testAgentToken]; resp.StatusCode != want {
			t.Fatalf("relay: status %d, want %d: %s", resp.StatusCode, want, body)
		}
	}
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// metricFamily is one family of a text exposition.
type metricFamily struct {
	typ    string
	labels map[string]bool
}

var (
	typeLine   = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) ([a-z]+)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? `)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
)

// parseExposition returns the families of a Prometheus text exposition.
func parseExposition(t *testing.T, text string) map[string]*metricFamily {
	t.Helper()
	fams := map[string]*metricFamily{}
	for _, line := range strings.Split(text, "\n") {
		if m := typeLine.FindStringSubmatch(line); m != nil {
			fams[m[1]] = &metricFamily{typ: m[2], labels: map[string]bool{}}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		f := familyOf(fams, m[1])
		if f == nil {
			t.Fatalf("sample %q has no # TYPE", line)
		}
		for _, l := range labelPair.FindAllStringSubmatch(m[3], -1) {
			f.labels[l[1]] = true
		}
	}
	return fams
}

// familyOf resolves a series name (a histogram's _bucket, _sum, _count too).
func familyOf(fams map[string]*metricFamily, name string) *metricFamily {
	if f, ok := fams[name]; ok {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && (f.typ == "histogram" || f.typ == "summary") {
				return f
			}
		}
	}
	return nil
}

// dashboardExprs returns every PromQL expression of a Grafana dashboard: the
// targets of its panels (nested rows too) and its query variables.
func dashboardExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p struct {
				Title   string            `json:"title"`
				Type    string            `json:"type"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					RefID string `json:"refId"`
					Expr  string `json:"expr"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", path, err)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", path, p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: panel %q target %s has no expression", path, p.Title, tg.RefID)
				}
				out[fmt.Sprintf("panel %q %s", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		switch q := v.Query.(type) {
		case string:
			out["variable "+v.Name] = q
		case map[string]any:
			s, _ := q["query"].(string)
			out["variable "+v.Name] = s
		}
	}
	return out
}

// ruleExprs returns the expression of every rule of a Prometheus rules file.
func ruleExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert+r.Record] = r.Expr
		}
	}
	return out
}

var (
	metricRef   = regexp.MustCompile(`\bironcurtain_[a-zA-Z0-9_]+`)
	groupingRef = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcherRef  = regexp.MustCompile(`\bironcurtain_[a-zA-Z0-9_]+\{([^}]*)\}`)
	matcherName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// The labels Prometheus adds to every scraped series, and a histogram's le.
	scrapeLabels = map[string]bool{"instance": true, "job": true, "le": true}
)

// checkExprs reports every metric an expression names that the exposition
// does not have, and every label it groups or filters by that none of its
// metrics has.
func checkExprs(t *testing.T, what string, exprs map[string]string, fams map[string]*metricFamily) (used map[string]bool) {
	t.Helper()
	used = map[string]bool{}
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		expr := exprs[k]
		names := metricRef.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s %s: %q names no ironcurtain_ metric", what, k, expr)
			continue
		}
		labels := map[string]bool{}
		for l := range scrapeLabels {
			labels[l] = true
		}
		for _, n := range names {
			f := familyOf(fams, n)
			if f == nil {
				t.Errorf("%s %s: metric %s is not in the gateway's /metrics", what, k, n)
				continue
			}
			used[n] = true
			for l := range f.labels {
				labels[l] = true
			}
		}
		var refs []string
		for _, m := range groupingRef.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); l != "" {
					refs = append(refs, l)
				}
			}
		}
		for _, m := range matcherRef.FindAllStringSubmatch(expr, -1) {
			for _, l := range matcherName.FindAllStringSubmatch(m[1], -1) {
				refs = append(refs, l[1])
			}
		}
		for _, l := range refs {
			if !labels[l] {
				t.Errorf("%s %s: label %q is on none of %v", what, k, l, names)
			}
		}
	}
	return used
}

// TestObservabilityLiveMetrics: promtool accepts a live /metrics, and the
// dashboard and the alert rules name only what it holds.
func TestObservabilityLiveMetrics(t *testing.T) {
	promtool(t)
	db := pgtest.New(t, pgtest.Migrated())
	sandbox := t.TempDir()
	g := runObservedGateway(t, db, sandbox, pinNotesEcho(t, sandboxPolicy(t, sandbox)))
	driveTraffic(t, g, db, sandbox)
	// Scraped as Prometheus does: with a metrics token, which opens nothing else.
	status, text := opsDo(t, g.ops, http.MethodGet, "/metrics", testMetricsToken)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics with the metrics token: %d %.200s", status, text)
	}
	for _, path := range []string{"/v1/escalations", "/v1/audit/tool-calls", "/v1/sessions", "/v1/policy"} {
		if status, body := opsDo(t, g.ops, http.MethodGet, path, testMetricsToken); status != http.StatusUnauthorized {
			t.Errorf("GET %s with the metrics token: %d, want 401: %.200s", path, status, body)
		}
	}

	t.Run("promtool check metrics", func(t *testing.T) {
		out := runPromtool(t, []byte(text), "check", "metrics")
		if strings.TrimSpace(out) != "" {
			t.Errorf("promtool check metrics reported: %s", out)
		}
	})

	fams := parseExposition(t, text)
	var ours []string
	for name := range fams {
		if strings.HasPrefix(name, "ironcurtain_") {
			ours = append(ours, name)
		}
	}
	sort.Strings(ours)
	t.Logf("%d ironcurtain_ metric families in the live /metrics", len(ours))

	var usedByDashboard, usedByRules map[string]bool
	t.Run("dashboard", func(t *testing.T) {
		usedByDashboard = checkExprs(t, obsDashboard, dashboardExprs(t, obsDashboard), fams)
	})
	t.Run("alert rules", func(t *testing.T) {
		usedByRules = checkExprs(t, obsRules, ruleExprs(t, obsRules), fams)
	})

	// What the issue asks the dashboard to show, by metric.
	t.Run("dashboard covers the issue's list", func(t *testing.T) {
		for _, m := range []string{
			"ironcurtain_decisions_by_rule_total",            // decisions by rule
			"ironcurtain_escalations_pending",                // escalation queue depth
			"ironcurtain_escalation_decision_seconds_bucket", // time to decision
			"ironcurtain_audit_commit_seconds_bucket",        // audit commit latency
			"ironcurtain_audit_failures_total",               // audit failures
			"ironcurtain_egress_requests_total",              // egress by decision
			"ironcurtain_egress_by_domain_total",             // egress by domain
			"ironcurtain_relay_tokens_total",                 // relay tokens
			"ironcurtain_relay_cost_usd_total",               // relay cost
		} {
			if !usedByDashboard[m] {
				t.Errorf("no dashboard panel shows %s", m)
			}
		}
		for _, m := range []string{"ironcurtain_audit_failures_total", "ironcurtain_escalations_pending", "ironcurtain_relay_refusals_total"} {
			if !usedByRules[m] {
				t.Errorf("no alert watches %s", m)
			}
		}
	})

	// The metrics added with the policy reload, tool pins, the loop breaker,
	// secret scanning and the auto-approver: each on a panel, and those an
	// operator must act on watched by an alert.
	t.Run("dashboard and alerts cover the new features", func(t *testing.T) {
		for _, m := range []string{
			"ironcurtain_policy_info", "ironcurtain_policy_reloads_total", "ironcurtain_policy_reload_duration_seconds_bucket",
			"ironcurtain_tool_pin_mismatches_total",
			"ironcurtain_loop_breaker_trips_total", "ironcurtain_loop_breaker_refused_calls_total", "ironcurtain_loop_breaker_resolved_total",
			"ironcurtain_egress_secret_findings_total", "ironcurtain_relay_secret_findings_total",
			"ironcurtain_auto_approver_reviews_total", "ironcurtain_auto_approver_review_seconds_bucket",
			"ironcurtain_auto_approver_tokens_total", "ironcurtain_auto_approver_cost_usd_total",
			"ironcurtain_auto_approver_day_calls", "ironcurtain_auto_approver_day_tokens", "ironcurtain_auto_approver_day_cost_usd",
		} {
			if !usedByDashboard[m] {
				t.Errorf("no dashboard panel shows %s", m)
			}
		}
		for _, m := range []string{
			"ironcurtain_policy_reloads_total", "ironcurtain_policy_info", "ironcurtain_tool_pin_mismatches_total",
			"ironcurtain_loop_breaker_trips_total", "ironcurtain_decisions_by_rule_total", "ironcurtain_auto_approver_reviews_total",
		} {
			if !usedByRules[m] {
				t.Errorf("no alert watches %s", m)
			}
		}
		// The gateway saw what it was given: the rug-pulled tool of the
		// external server (counted by what changed) and the escalation the
		// auto-approver reviewed (the fake model's answer is not a verdict).
		for _, series := range []string{
			`ironcurtain_tool_pin_mismatches_total{change="description",server="notes",tool="echo"} 1`,
			`ironcurtain_auto_approver_reviews_total{outcome="malformed"} 1`,
			`ironcurtain_loop_breaker_trips_total{limit="denials"} 0`,
			`ironcurtain_egress_secret_findings_total{kind="github-token"} 0`,
			`ironcurtain_policy_reloads_total{result="failed"} 0`,
		} {
			if !strings.Contains(text, "\n"+series+"\n") {
				t.Errorf("/metrics lacks %s", series)
			}
		}
	})
}

// testMetricsToken is the observed gateway's IRONCURTAIN_METRICS_TOKEN.
const testMetricsToken = "metrics-token-for-tests-0123456789"
