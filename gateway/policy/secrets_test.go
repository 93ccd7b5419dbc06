package policy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/secretscan"
)

// Sample secrets are assembled at run time so that the repository holds
// none in one piece.
var (
	tAWSKey     = "AKIA" + "IOSFODNN7EXAMPLE"
	tGHToken    = "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "123456"
	tJWT        = "eyJ" + "hbGciOiJIUzI1NiJ9" + ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	tAgentToken = "ic-agent-" + "Zq81kVt0pLm3xR7wYc2N"
	tPrivateKey = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + strings.Repeat("b3BlbnNzaC1rZXktdjEAAAAABG5v", 3) + "\n-----END OPENSSH PRIVATE KEY-----"
)

const secretsPolicy = `{"generatedAt": "2026-05-01T00:00:00.000Z", "constitutionHash": "t", "inputHash": "t", "rules": [
 {"name": "deny-fetch-blocked", "description": "d", "principle": "t", "if": {"server": ["fetch"], "tool": ["http_fetch"], "domains": {"roles": ["fetch-url"], "allowed": ["blocked.example"]}}, "then": "deny", "reason": "blocked"},
 {"name": "allow-fetch", "description": "d", "principle": "t", "if": {"server": ["fetch"]}, "then": "allow", "reason": "fetching is fine"},
 {"name": "allow-github", "description": "d", "principle": "t", "if": {"server": ["github"]}, "then": "allow", "reason": "github is fine"},
 {"name": "allow-notes", "description": "d", "principle": "t", "if": {"server": ["notes", "mail", "vcs"]}, "then": "allow", "reason": "fine"}
]}`

const secretsAnnotations = `{"generatedAt": "2026-05-01T00:00:00.000Z", "servers": {
 "fetch": {"inputHash": "t", "tools": [
  {"toolName": "http_fetch", "serverName": "fetch", "args": {"url": ["fetch-url"], "max_length": ["none"]}},
  {"toolName": "fetch_many", "serverName": "fetch", "args": {"urls": ["fetch-url"]}}]},
 "github": {"inputHash": "t", "tools": [
  {"toolName": "pr_create", "serverName": "github", "args": {"owner": ["github-owner"], "repo": ["github-repo"], "title": ["none"], "head": ["branch-name"], "base": ["branch-name"], "body": ["none"]}},
  {"toolName": "issue_comment", "serverName": "github", "args": {"owner": ["github-owner"], "repo": ["github-repo"], "number": ["none"], "body": ["none"]}}]},
 "notes": {"inputHash": "t", "tools": [
  {"toolName": "save", "serverName": "notes", "args": {"text": ["none"], "link": ["fetch-url"], "meta": ["none"]}},
  {"toolName": "create_issue", "serverName": "notes", "args": {"owner": ["github-owner"], "repo": ["github-repo"], "text": ["none"]}}]},
 "mail": {"inputHash": "t", "tools": [
  {"toolName": "send", "serverName": "mail", "args": {"to": ["email-address"], "body": ["email-body"], "subject": ["none"]}}]},
 "vcs": {"inputHash": "t", "tools": [
  {"toolName": "sync", "serverName": "vcs", "args": {"url": ["fetch-url"], "branch": ["branch-name"]}},
  {"toolName": "switch", "serverName": "vcs", "args": {"branch": ["branch-name"]}}]}
}}`

func secretsEngine(t testing.TB, s SecretScan, unsafe ...string) *Engine {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		CompiledPolicyFile: secretsPolicy,
		AnnotationsFile:    secretsAnnotations,
		DynamicListsFile:   `{"generatedAt": "2026-05-01T00:00:00.000Z", "lists": {}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set := Settings{Sandbox: t.TempDir(), Secrets: s}
	for _, p := range unsafe {
		set.UnsafeAllowAddresses = append(set.UnsafeAllowAddresses, netip.MustParsePrefix(p))
	}
	e, err := LoadDir(dir, set)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestSecretEgress(t *testing.T) {
	e := secretsEngine(t, SecretScan{Exact: []secretscan.Secret{{Label: "agent token agent", Value: tAgentToken}}})
	b64 := base64.StdEncoding.EncodeToString([]byte("aws " + tAWSKey))
	tests := []struct {
		name   string
		tool   string
		args   map[string]any
		want   Status
		rule   string
		kind   secretscan.Kind
		where  string // in the recorded reason
		masked string // in the operator's reason
	}{
		{name: "key in query", tool: "fetch__http_fetch", args: map[string]any{"url": "https://github.com/search?q=" + tAWSKey},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `query parameter q of argument "url"`, masked: "AKIA…MPLE"},
		{name: "key in the host name, as given", tool: "fetch__http_fetch", args: map[string]any{"url": "https://" + tAWSKey + ".example.com/"},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `host name of argument "url"`},
		{name: "key in the host name, lower-cased by the agent", tool: "fetch__http_fetch", args: map[string]any{"url": "https://" + strings.ToLower(tAWSKey) + ".Example.com/"},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `host name of argument "url"`},
		{name: "key in fragment", tool: "fetch__http_fetch", args: map[string]any{"url": "https://example.com/page#" + tGHToken},
			want: Escalate, kind: secretscan.KindGitHubToken, where: `fragment of argument "url"`, masked: "ghp_…3456"},
		{name: "key in path", tool: "fetch__http_fetch", args: map[string]any{"url": "https://example.com/x/" + tGHToken},
			want: Escalate, kind: secretscan.KindGitHubToken, where: `path of argument "url"`},
		{name: "base64 in query", tool: "fetch__http_fetch", args: map[string]any{"url": "https://gist.githubusercontent.com/someone/x/raw?d=" + url.QueryEscape(b64)},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `query parameter d (base64) of argument "url"`},
		{name: "percent-encoded in query", tool: "fetch__http_fetch", args: map[string]any{"url": "https://example.com/?t=" + strings.ReplaceAll(url.QueryEscape(tJWT), ".", "%2E")},
			want: Escalate, kind: secretscan.KindJWT, where: `query parameter t of argument "url"`},
		{name: "one of several URLs", tool: "fetch__fetch_many", args: map[string]any{"urls": []any{"https://example.com/", "https://example.org/?k=" + tAWSKey}},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `query parameter k of argument "urls"`},
		{name: "exact agent token in query", tool: "fetch__http_fetch", args: map[string]any{"url": "https://example.com/?session=" + tAgentToken},
			want: Escalate, kind: secretscan.KindExact, where: `query parameter session of argument "url"`, masked: "[agent token agent]"},
		{name: "token in a PR body", tool: "github__pr_create", args: map[string]any{"owner": "acme", "repo": "app", "title": "Fix", "head": "f", "base": "main", "body": "see " + tGHToken},
			want: Escalate, kind: secretscan.KindGitHubToken, where: `value of argument "body"`},
		{name: "key in a PR title", tool: "github__pr_create", args: map[string]any{"owner": "acme", "repo": "app", "title": tAWSKey, "head": "f", "base": "main"},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `value of argument "title"`},
		{name: "private key in an issue comment", tool: "github__issue_comment", args: map[string]any{"owner": "acme", "repo": "app", "number": 3.0, "body": "```\n" + tPrivateKey + "\n```"},
			want: Escalate, kind: secretscan.KindPrivateKey, where: `value of argument "body"`},
		{name: "github tool of another server", tool: "notes__create_issue", args: map[string]any{"owner": "acme", "repo": "app", "text": tAWSKey},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `value of argument "text"`},
		{name: "URL role of any server", tool: "notes__save", args: map[string]any{"text": "hello", "link": "https://example.com/?k=" + tAWSKey},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `query parameter k of argument "link"`},
		{name: "email body", tool: "mail__send", args: map[string]any{"to": "x@example.com", "body": "key " + tAWSKey},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `value of argument "body"`},
		{name: "branch name of a call that contacts a remote", tool: "vcs__sync", args: map[string]any{"url": "https://example.com/repo.git", "branch": "fix-" + tGHToken},
			want: Escalate, kind: secretscan.KindGitHubToken, where: `value of argument "branch"`},
		{name: "branch name of a call whose remote is defaulted", tool: "vcs__sync", args: map[string]any{"branch": tAWSKey},
			want: Escalate, kind: secretscan.KindAWSKeyID, where: `value of argument "branch"`},
		{name: "blocked site still denied", tool: "fetch__http_fetch", args: map[string]any{"url": "https://blocked.example/?q=" + tAWSKey},
			want: Deny, rule: "deny-fetch-blocked"},

		// Not scanned, or nothing to find.
		{name: "clean URL", tool: "fetch__http_fetch", args: map[string]any{"url": "https://github.com/search?q=golang+context&type=code"}, want: Allow, rule: "allow-fetch"},
		{name: "clean PR", tool: "github__pr_create", args: map[string]any{"owner": "acme", "repo": "app", "title": "Fix the AKIA prefix check", "head": "f", "base": "main", "body": "ghp_ is a prefix"}, want: Allow, rule: "allow-github"},
		{name: "text of a non-text server", tool: "notes__save", args: map[string]any{"text": tAWSKey}, want: Allow, rule: "allow-notes"},
		{name: "branch name of a local call", tool: "vcs__switch", args: map[string]any{"branch": tAWSKey}, want: Allow, rule: "allow-notes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := e.Evaluate(context.Background(), Request{Server: strings.Split(tc.tool, "__")[0], Tool: strings.Split(tc.tool, "__")[1], Args: tc.args})
			d := ev.Decision
			if d.Status != tc.want {
				t.Fatalf("decision = %s (%s: %s), want %s", d.Status, d.Rule, d.Reason, tc.want)
			}
			rule := tc.rule
			if rule == "" {
				rule = RuleSecretEgress
			}
			if d.Rule != rule {
				t.Fatalf("rule = %s (%s), want %s", d.Rule, d.Reason, rule)
			}
			if rule != RuleSecretEgress {
				return
			}
			want := string(tc.kind) + " in " + tc.where
			if !strings.Contains(d.Reason, want) {
				t.Errorf("reason %q lacks %q", d.Reason, want)
			}
			op := d.OperatorReason()
			if tc.masked != "" && !strings.Contains(op, tc.masked+" ("+string(tc.kind)+") in "+tc.where) {
				t.Errorf("operator reason %q lacks the masked excerpt %q", op, tc.masked)
			}
			recorded, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, leak := range []string{tAWSKey, tGHToken, tJWT, tAgentToken, "AKIA…", "ghp_…", "…MPLE", "…3456", "[agent token"} {
				if strings.Contains(d.Reason, leak) || strings.Contains(d.Detail, leak) || strings.Contains(string(recorded), leak) {
					t.Errorf("recorded decision shows %q: %s", leak, recorded)
				}
			}
			for _, leak := range []string{tAWSKey, tGHToken, tJWT, tAgentToken} {
				if strings.Contains(op, leak) {
					t.Errorf("operator reason shows the value: %s", op)
				}
			}
		})
	}
}

func TestSecretEgressSettings(t *testing.T) {
	body := map[string]any{"owner": "acme", "repo": "app", "number": 1.0, "body": "aws " + tAWSKey + " and " + tJWT}
	req := Request{Server: "github", Tool: "issue_comment", Args: body}
	t.Run("deny per detector", func(t *testing.T) {
		e := secretsEngine(t, SecretScan{Deny: []secretscan.Kind{secretscan.KindJWT}})
		d := e.Evaluate(context.Background(), req).Decision
		if d.Status != Deny || d.Rule != RuleSecretEgress || !strings.Contains(d.Reason, "json-web-token") || !strings.Contains(d.Reason, "aws-access-key-id") {
			t.Fatalf("decision = %+v", d)
		}
	})
	t.Run("detector off", func(t *testing.T) {
		e := secretsEngine(t, SecretScan{Kinds: []secretscan.Kind{secretscan.KindAWSKeyID}})
		d := e.Evaluate(context.Background(), req).Decision
		if d.Status != Escalate || strings.Contains(d.Reason, "json-web-token") {
			t.Fatalf("decision = %+v", d)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		e := secretsEngine(t, SecretScan{Disabled: true})
		if d := e.Evaluate(context.Background(), req).Decision; d.Status != Allow {
			t.Fatalf("decision = %+v", d)
		}
	})
	t.Run("text servers", func(t *testing.T) {
		e := secretsEngine(t, SecretScan{TextServers: []string{"notes"}})
		d := e.Evaluate(context.Background(), Request{Server: "notes", Tool: "save", Args: map[string]any{"text": "k " + tAWSKey}}).Decision
		if d.Status != Escalate || d.Rule != RuleSecretEgress {
			t.Fatalf("decision = %+v", d)
		}
		// Nested values are scanned too (keys and values).
		d = e.Evaluate(context.Background(), Request{Server: "notes", Tool: "save", Args: map[string]any{"meta": map[string]any{tGHToken: []any{"x"}}}}).Decision
		if d.Status != Escalate {
			t.Fatalf("nested key: decision = %+v", d)
		}
	})
	t.Run("unknown detector", func(t *testing.T) {
		if _, err := NewSecretScanner(SecretScan{Deny: []secretscan.Kind{"aws"}}); err == nil || !strings.Contains(err.Error(), "deny[0]") {
			t.Fatalf("err = %v", err)
		}
		if _, err := NewSecretScanner(SecretScan{Kinds: []secretscan.Kind{"aws"}}); err == nil || !strings.Contains(err.Error(), "kinds") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("too many values", func(t *testing.T) {
		e := secretsEngine(t, SecretScan{TextServers: []string{"notes"}})
		many := make([]any, maxScanValues+1)
		for i := range many {
			many[i] = "x"
		}
		d := e.Evaluate(context.Background(), Request{Server: "notes", Tool: "save", Args: map[string]any{"meta": many}}).Decision
		if d.Status != Deny || d.Rule != RuleSecretEgress {
			t.Fatalf("decision = %+v", d)
		}
	})
}

// An escalation for another reason is kept in the secret decision's reason:
// the human approves both at once.
func TestSecretEgressCombines(t *testing.T) {
	dir := t.TempDir()
	_ = dir
	e := secretsEngine(t, SecretScan{})
	e2 := *e
	e2.allow = map[string]domainSet{"fetch": {patterns: mustPatterns(t, "github.com")}}
	d := e2.Evaluate(context.Background(), Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": "https://example.org/?q=" + tAWSKey}}).Decision
	if d.Status != Escalate || d.Rule != RuleSecretEgress || !strings.Contains(d.Reason, "also: URL domain") {
		t.Fatalf("decision = %+v", d)
	}
}

func mustPatterns(t *testing.T, ps ...string) []domainPattern {
	t.Helper()
	out, err := parseDomainPatterns(ps)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSpecialHosts(t *testing.T) {
	e := secretsEngine(t, SecretScan{})
	for _, u := range []string{
		"http://localhost/", "http://LOCALHOST./admin", "http://api.localhost:8080/", "http://ip6-localhost/",
		"http://metadata.google.internal/computeMetadata/v1/", "http://metadata/computeMetadata/v1/", "http://instance-data/latest/",
		"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://[::ffff:169.254.169.254]/",
		"http://2852039166/", "http://0xa9fea9fe/", "http://10.0.0.1/", "http://192.168.1.1/", "http://100.64.0.1/",
		"http://0.0.0.0/", "http://[::]/", "http://[fe80::1]/", "http://224.0.0.1/", "http://[64:ff9b::a9fe:a9fe]/",
	} {
		d := e.Evaluate(context.Background(), Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": u}}).Decision
		if d.Status != Deny || d.Rule != RuleSpecialHost {
			t.Errorf("%s: decision = %s %s (%s), want deny %s", u, d.Status, d.Rule, d.Reason, RuleSpecialHost)
		}
	}
	for _, u := range []string{"https://example.com/", "https://8.8.8.8/", "https://[2606:4700::1111]/", "https://localhost.example.com/", "https://metadata.example.com/"} {
		if d := e.Evaluate(context.Background(), Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": u}}).Decision; d.Rule == RuleSpecialHost {
			t.Errorf("%s: denied as a special host: %s", u, d.Reason)
		}
	}
	// The egress guard's unsafe allowance lets the same addresses through here.
	e = secretsEngine(t, SecretScan{}, "127.0.0.0/8", "10.1.2.0/24")
	for _, u := range []string{"http://127.0.0.1:8080/", "http://localhost:8080/", "http://10.1.2.3/"} {
		if d := e.Evaluate(context.Background(), Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": u}}).Decision; d.Status != Allow {
			t.Errorf("%s with an unsafe allowance: decision = %s %s (%s)", u, d.Status, d.Rule, d.Reason)
		}
	}
	for _, u := range []string{"http://metadata.google.internal/", "http://10.1.3.1/"} {
		if d := e.Evaluate(context.Background(), Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": u}}).Decision; d.Rule != RuleSpecialHost {
			t.Errorf("%s with an unrelated unsafe allowance: decision = %s %s", u, d.Status, d.Rule)
		}
	}
}

// FuzzSecretEgress: whatever the URL, evaluation never panics, a secret
// decision's recorded form never holds an excerpt, and an escalation or
// allow never names a special host.
func FuzzSecretEgress(f *testing.F) {
	for _, s := range []string{"https://github.com/search?q=" + tAWSKey, "http://localhost/", "https://e.com/#" + tJWT, "https://e.com/?d=" + base64.StdEncoding.EncodeToString([]byte(tGHToken))} {
		f.Add(s)
	}
	e := secretsEngine(f, SecretScan{})
	f.Fuzz(func(t *testing.T, u string) {
		d := e.Evaluate(context.Background(), Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": u}}).Decision
		if d.Rule == RuleInternalError {
			t.Fatalf("internal error: %s", d.Detail)
		}
		b, _ := json.Marshal(d)
		for _, f := range d.Secrets {
			if f.Excerpt != "" && len(f.Excerpt) > 6 && strings.Contains(string(b), f.Excerpt) {
				t.Fatalf("recorded decision holds the excerpt %q: %s", f.Excerpt, b)
			}
		}
	})
}

// BenchmarkEvaluateFetch is a fetch call's evaluation with secret scanning
// on and off: the difference is the latency scanning adds to a fetch (the
// issue wants <= 50 µs median).
func BenchmarkEvaluateFetch(b *testing.B) {
	u := "https://github.com/search?q=golang+context+cancel+deadline&type=code&p=2#results"
	for _, bc := range []struct {
		name string
		s    SecretScan
	}{{"scan", SecretScan{}}, {"noscan", SecretScan{Disabled: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			e := secretsEngine(b, bc.s)
			req := Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": u}}
			cpu := processCPU()
			for b.Loop() {
				if d := e.Evaluate(context.Background(), req).Decision; d.Status != Allow {
					b.Fatalf("decision = %+v", d)
				}
			}
			// CPU time per evaluation: the stable figure on a shared machine.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
