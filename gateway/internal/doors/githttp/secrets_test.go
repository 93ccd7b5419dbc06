package githttp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// Sample secrets are assembled at run time so that the repository holds none in one piece.
var (
	sampleAWSKey  = "AKIA" + "IOSFODNN7EXAMPLE"
	sampleGHToken = "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "123456"
)

// TestPushSecrets: a push that adds a secret (in a file, in a commit
// message deep in the pushed range, in a binary file) is escalated as
// structural-secret-egress with the masked excerpt shown to the operator
// only; the record and the client see kind and location; approval pushes,
// denial leaves the upstream unchanged; a detector set to deny refuses
// without asking; a push too large to scan is escalated.
func TestPushSecrets(t *testing.T) {
	type step struct{ file, content, msg string }
	tests := []struct {
		name        string
		steps       []step
		secrets     policy.SecretScan
		cfg         Config
		answer      *escalation.Result // nil: no escalation expected
		landed      bool
		wantWhere   string // in the recorded reason and the client's output
		wantExcerpt string // in the operator's reason only
	}{
		{name: "key in an added file approved",
			steps:  []step{{"config/prod.env", "AWS_ACCESS_KEY_ID=" + sampleAWSKey + "\n", "add config"}},
			answer: &escalation.Result{Approved: true, Status: "approved", DecidedBy: "ops"}, landed: true,
			wantWhere: "aws-access-key-id in file config/prod.env", wantExcerpt: "AKIA…MPLE"},
		{name: "key in an added file denied",
			steps:     []step{{"config/prod.env", "AWS_ACCESS_KEY_ID=" + sampleAWSKey + "\n", "add config"}},
			answer:    &escalation.Result{Status: "denied", DecidedBy: "ops", Reason: "rotate it first"},
			wantWhere: "aws-access-key-id in file config/prod.env", wantExcerpt: "AKIA…MPLE"},
		{name: "token only in a commit message deep in the range",
			steps:     []step{{"a.txt", "a\n", "debug: used " + sampleGHToken}, {"b.txt", "b\n", "b"}, {"c.txt", "c\n", "c"}},
			answer:    &escalation.Result{Status: "denied", DecidedBy: "ops"},
			wantWhere: "github-token in commit ", wantExcerpt: "ghp_…3456"},
		{name: "key inside a binary file",
			steps:  []step{{"logo.bin", "\x00\x01PNG\x00" + sampleAWSKey + "\x00\xff", "logo"}},
			answer: &escalation.Result{Status: "denied"}, wantWhere: "aws-access-key-id in file logo.bin", wantExcerpt: "AKIA…MPLE"},
		{name: "denied by setting nobody asked",
			steps:     []step{{"k.pem", "-----BEGIN " + "RSA PRIVATE KEY-----\n" + strings.Repeat("MIIEowIBAAKCAQEAx1y2z3", 4) + "\n-----END RSA PRIVATE KEY-----\n", "key"}},
			secrets:   policy.SecretScan{Deny: []secretscan.Kind{secretscan.KindPrivateKey}},
			wantWhere: "private-key in file k.pem"},
		{name: "too large to scan in full",
			steps:  []step{{"big.txt", strings.Repeat("lorem ipsum dolor sit amet\n", 400), "big"}},
			cfg:    Config{MaxScanBytes: 1024},
			answer: &escalation.Result{Status: "denied"}, wantWhere: "unscanned-push in push"},
		{name: "clean push is not asked about",
			steps:  []step{{"main.go", "package main // AKIA is only a prefix\n", "clean"}},
			landed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			esc := &fakeEscalator{started: make(chan escalation.Request, 1), answer: make(chan escalation.Result, 1)}
			e := newEnv(t, envOptions{esc: esc, secrets: tc.secrets, cfg: tc.cfg})
			work := e.clone(t)
			e.mustGit(t, work, "switch", "-q", "-c", "feature")
			var head string
			for _, s := range tc.steps {
				p := filepath.Join(work, s.file)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, p, s.content)
				e.mustGit(t, work, "add", s.file)
				e.mustGit(t, work, "commit", "-q", "-m", s.msg)
				head = strings.TrimSpace(e.mustGit(t, work, "rev-parse", "HEAD"))
			}
			type result struct {
				out string
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := e.git(work, "push", "origin", "feature")
				done <- result{out, err}
			}()
			var r result
			if tc.answer != nil {
				var req escalation.Request
				select {
				case req = <-esc.started:
				case r := <-done:
					t.Fatalf("the push ended without an escalation: %v\n%s", r.err, r.out)
				case <-time.After(60 * time.Second):
					t.Fatal("no escalation")
				}
				if req.Rule != policy.RuleSecretEgress || req.Tool != "push" {
					t.Fatalf("escalation %+v", req)
				}
				if !strings.Contains(req.Reason, tc.wantWhere) || !strings.Contains(req.Reason, tc.wantExcerpt) {
					t.Fatalf("the operator sees %q; want %q and the masked excerpt %q", req.Reason, tc.wantWhere, tc.wantExcerpt)
				}
				assertNoSecret(t, "escalation", req.Reason+string(req.Args))
				esc.answer <- *tc.answer
			}
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the push did not end")
			}
			t.Logf("git push output:\n%s", r.out)
			got := e.upstreamRef(t, "refs/heads/feature")
			if tc.landed != (got == head) || tc.landed != (r.err == nil) {
				t.Fatalf("landed=%v (upstream %q, head %q, err %v); want %v\n%s", got == head, got, head, r.err, tc.landed, r.out)
			}
			assertNoSecret(t, "client output", r.out)
			if tc.wantExcerpt != "" && strings.Contains(r.out, tc.wantExcerpt) {
				t.Fatalf("the client sees the masked excerpt:\n%s", r.out)
			}
			if tc.wantWhere != "" && !strings.Contains(r.out, tc.wantWhere) {
				t.Fatalf("the client is not told what was found (%q):\n%s", tc.wantWhere, r.out)
			}
			if tc.answer == nil && tc.wantWhere != "" {
				select {
				case req := <-esc.started:
					t.Fatalf("a denied detector asked a human: %+v", req)
				default:
				}
			}
			dec := e.sink.last(t)
			if tc.wantWhere == "" {
				if dec.Rule == policy.RuleSecretEgress {
					t.Fatalf("clean push decided by %s: %s", dec.Rule, dec.Reason)
				}
				return
			}
			if dec.Rule != policy.RuleSecretEgress || !strings.Contains(dec.Reason, tc.wantWhere) {
				t.Fatalf("recorded %s %q; want %s naming %q", dec.Rule, dec.Reason, policy.RuleSecretEgress, tc.wantWhere)
			}
			rec := dec.Reason + dec.Detail + string(dec.Args)
			assertNoSecret(t, "record", rec)
			if tc.wantExcerpt != "" && strings.Contains(rec, tc.wantExcerpt) {
				t.Fatalf("the record holds the masked excerpt: %s", rec)
			}
			if !strings.Contains(string(dec.Args), `"secret_scan"`) {
				t.Fatalf("the record does not say what was scanned: %s", dec.Args)
			}
		})
	}
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{sampleAWSKey, sampleGHToken, "MIIEowIBAAKCAQEAx1y2z3"} {
		if strings.Contains(s, v) {
			t.Fatalf("the %s carries a secret: %s", what, s)
		}
	}
}
