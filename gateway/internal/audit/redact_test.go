package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fake secrets of the right shapes (none is real).
const (
	ghToken     = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	ghoToken    = "gho_0123456789abcdefghijABCDEFGHIJ012345"
	ghPAT       = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789abcdefg"
	awsKeyID    = "AKIAIOSFODNN7EXAMPLE"
	awsSecret   = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	anthropic   = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
	slackToken  = "xoxb-123456789012-abcdefghijkl"
	jwt         = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk_lmnop"
	privateKey  = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----"
	basicCred   = "dXNlcjpodW50ZXIy"
	googleKey   = "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234"
	gitlabToken = "glpat-abcdefghijklmnopqrst"
)

func TestRedactString(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		mustNot  []string // substrings that must be gone
		mustKeep []string // substrings that must survive
	}{
		{name: "github classic", in: "token " + ghToken + " used", mustNot: []string{ghToken}, mustKeep: []string{"token ", " used"}},
		{name: "github oauth", in: ghoToken, mustNot: []string{ghoToken}},
		{name: "github fine-grained", in: "x=" + ghPAT, mustNot: []string{ghPAT, "11ABCDEFG"}},
		{name: "aws key id", in: "aws " + awsKeyID + ".", mustNot: []string{awsKeyID}, mustKeep: []string{"aws ", "."}},
		{name: "aws secret", in: "aws_secret_access_key = " + awsSecret, mustNot: []string{awsSecret}, mustKeep: []string{"aws_secret_access_key"}},
		{name: "authorization header bearer", in: "Authorization: Bearer abc.def-ghi", mustNot: []string{"abc.def-ghi"}, mustKeep: []string{"Authorization: "}},
		{name: "proxy authorization basic", in: "Proxy-Authorization: Basic " + basicCred, mustNot: []string{basicCred}, mustKeep: []string{"Proxy-Authorization"}},
		{name: "lowercase header no scheme", in: "authorization=opaque-credential-1234", mustNot: []string{"opaque-credential-1234"}},
		{name: "bare bearer", in: `curl -H "Bearer tok_123456"`, mustNot: []string{"tok_123456"}, mustKeep: []string{"curl -H"}},
		{name: "private key block", in: "key:\n" + privateKey + "\nafter", mustNot: []string{"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "PRIVATE KEY"}, mustKeep: []string{"after"}},
		{name: "truncated private key", in: "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", mustNot: []string{"MIIEpAIBAAKCAQEA"}},
		{name: "anthropic key", in: anthropic, mustNot: []string{anthropic}},
		{name: "slack token", in: "t=" + slackToken, mustNot: []string{slackToken}},
		{name: "jwt", in: "cookie " + jwt, mustNot: []string{jwt}},
		{name: "google key", in: googleKey, mustNot: []string{googleKey}},
		{name: "gitlab token", in: gitlabToken, mustNot: []string{gitlabToken}},
		{name: "url password", in: "https://alice:hunter2@github.com/acme/app.git", mustNot: []string{"hunter2"}, mustKeep: []string{"https://alice:", "@github.com/acme/app.git"}},
		{name: "password flag", in: "--password=hunter2 --user=bob", mustNot: []string{"hunter2"}, mustKeep: []string{"--user=bob"}},
		{name: "env assignment", in: "DB_PASSWORD=hunter2 MY_API_KEY: abc123", mustNot: []string{"hunter2", "abc123"}, mustKeep: []string{"DB_PASSWORD="}},
		{name: "plain text kept", in: "read /workspace/src/main.go", mustKeep: []string{"read /workspace/src/main.go"}},
		{name: "max tokens is not a secret", in: "max_tokens: 1024", mustKeep: []string{"max_tokens: 1024"}},
		{name: "invalid utf8 and NUL", in: "a\xffb\x00c", mustNot: []string{"\xff", "\x00"}, mustKeep: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactString(tt.in)
			for _, s := range tt.mustNot {
				if strings.Contains(got, s) {
					t.Errorf("RedactString(%q) = %q still contains %q", tt.in, got, s)
				}
			}
			for _, s := range tt.mustKeep {
				if !strings.Contains(got, s) {
					t.Errorf("RedactString(%q) = %q lost %q", tt.in, got, s)
				}
			}
			if !utf8.ValidString(got) {
				t.Errorf("RedactString(%q) = %q is not valid UTF-8", tt.in, got)
			}
			if again := RedactString(got); again != got {
				t.Errorf("not idempotent: %q then %q", got, again)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: `{}`},
		{name: "no secrets, canonical", in: `{"path": "/w/a.txt", "n": 1.50, "b": true, "z": null}`, want: `{"b":true,"n":1.50,"path":"/w/a.txt","z":null}`},
		{name: "password key", in: `{"user":"bob","password":"hunter2"}`, want: `{"password":"[REDACTED]","user":"bob"}`},
		{name: "key spellings", in: `{"apiKey":"a","X-Api-Key":"b","client_secret":"c","Authorization":"d","Proxy-Authorization":"e","auth":"f","githubToken":"g"}`,
			want: `{"Authorization":"[REDACTED]","Proxy-Authorization":"[REDACTED]","X-Api-Key":"[REDACTED]","apiKey":"[REDACTED]","auth":"[REDACTED]","client_secret":"[REDACTED]","githubToken":"[REDACTED]"}`},
		{name: "nested under sensitive key", in: `{"credentials":{"user":"u","list":["a","b"]}}`, want: `{"credentials":{"list":["[REDACTED]","[REDACTED]"],"user":"[REDACTED]"}}`},
		{name: "numbers under token keys kept", in: `{"max_tokens":1024,"token_budget":5}`, want: `{"max_tokens":1024,"token_budget":5}`},
		{name: "headers object", in: `{"headers":{"Authorization":"Bearer abc","Accept":"text/html"}}`, want: `{"headers":{"Accept":"text/html","Authorization":"[REDACTED]"}}`},
		{name: "token inside content", in: `{"content":"export GH=` + ghToken + `\n"}`, want: `{"content":"export GH=[REDACTED]\n"}`},
		{name: "array of strings", in: `["git","push","https://x:` + ghToken + `@github.com/a/b"]`, want: `["git","push","https://x:[REDACTED]@github.com/a/b"]`},
		{name: "secret as key", in: `{"` + ghToken + `":1}`, want: `{"[REDACTED]":1}`},
		{name: "html not escaped", in: `{"q":"<a&b>"}`, want: `{"q":"<a&b>"}`},
		{name: "invalid json kept redacted", in: `{"password": hunter2 ` + ghToken, want: `{"invalid_json":"{\"password\": [REDACTED] [REDACTED]"}`},
		{name: "trailing data", in: `{} {"a":1}`, want: `{"invalid_json":"{} {\"a\":1}"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(Redact(json.RawMessage(tt.in)))
			if got != tt.want {
				t.Fatalf("Redact(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("Redact output is not valid JSON: %s", got)
			}
		})
	}
}

func TestRedactEvent(t *testing.T) {
	d := &ToolCallDecision{CallID: "c1", Args: json.RawMessage(`{"token":"x"}`), Reason: "saw " + ghToken, Detail: "Authorization: Bearer zzz"}
	got := RedactEvent(d).(*ToolCallDecision)
	if string(got.Args) != `{"token":"[REDACTED]"}` || strings.Contains(got.Reason, ghToken) || strings.Contains(got.Detail, "zzz") {
		t.Fatalf("RedactEvent = %+v", got)
	}
	if string(d.Args) != `{"token":"x"}` {
		t.Fatal("RedactEvent modified its input")
	}
	o := RedactEvent(&ToolCallOutcome{Error: "push failed: https://u:" + ghToken + "@github.com"}).(*ToolCallOutcome)
	if strings.Contains(o.Error, ghToken) {
		t.Fatalf("outcome error not redacted: %q", o.Error)
	}
	g := RedactEvent(&EgressEvent{Error: "dial: " + awsKeyID}).(*EgressEvent)
	l := RedactEvent(&LLMCall{Error: "401 for " + anthropic}).(*LLMCall)
	if strings.Contains(g.Error, awsKeyID) || strings.Contains(l.Error, anthropic) {
		t.Fatalf("egress/llm errors not redacted: %q %q", g.Error, l.Error)
	}
}

// plantedSecrets are inserted by the fuzzer; none may survive redaction.
var plantedSecrets = []string{ghToken, ghPAT, awsKeyID, anthropic, slackToken, jwt, googleKey, gitlabToken}

// FuzzRedact: whatever the agent sends, Redact never panics, returns valid
// JSON, is idempotent, and a known secret planted in any string is gone.
func FuzzRedact(f *testing.F) {
	f.Add([]byte(`{"path":"/w/a"}`), uint8(0))
	f.Add([]byte(`{"password":"x","nested":{"a":["b",{"c":"d"}]}}`), uint8(3))
	f.Add([]byte(`["a", 1, true, null, 1e400]`), uint8(5))
	f.Add([]byte(`not json`), uint8(1))
	f.Add([]byte(`{"a":"Authorization: Bearer "}`), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, which uint8) {
		secret := plantedSecrets[int(which)%len(plantedSecrets)]
		// Plant the secret, surrounded by separators, inside the first string
		// value of the input (or as the whole input when it has none).
		planted := plant(in, secret)
		out := Redact(planted)
		if !json.Valid(out) {
			t.Fatalf("Redact(%q) = %q: invalid JSON", planted, out)
		}
		if again := Redact(out); string(again) != string(out) {
			t.Fatalf("not idempotent:\n%s\n%s", out, again)
		}
		if strings.Contains(string(out), secret) {
			t.Fatalf("secret %q survived: in %q out %q", secret, planted, out)
		}
		// RedactString on arbitrary text.
		s := RedactString(string(in) + " " + secret + " ")
		if strings.Contains(s, secret) || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("RedactString(%q) = %q", in, s)
		}
	})
}

func plant(in []byte, secret string) []byte {
	var v any
	if err := json.Unmarshal(in, &v); err != nil {
		return append(append([]byte{}, in...), []byte(" "+secret+" ")...)
	}
	wrapped := map[string]any{"orig": v, "planted": "x " + secret + " y"}
	b, _ := json.Marshal(wrapped)
	return b
}

func BenchmarkRedact(b *testing.B) {
	args := json.RawMessage(`{"path":"/workspace/src/main.go","content":"package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n","mode":"overwrite","headers":{"Authorization":"Bearer x"}}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = Redact(args)
	}
}

// BenchmarkRedactStringShort is the common case of StoredEvent: a dozen
// short identifiers (server, tool, rule, session and call ids, statuses)
// per recorded event, none of them secret.
func BenchmarkRedactStringShort(b *testing.B) {
	fields := []string{"filesystem", "read_text_file", "allow-sandbox-reads", "allow", "bench", "0195f3c2-7d1e-7a40-9b1c-3f2e1d0c9b8a", "ok", "Read inside the sandbox"}
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range fields {
			if RedactString(f) != f {
				b.Fatal("changed")
			}
		}
	}
}
