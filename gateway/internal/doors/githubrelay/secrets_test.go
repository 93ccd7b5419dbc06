package githubrelay

import (
	"encoding/json"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// Sample secrets are assembled at run time so that the repository holds none in one piece.
var (
	sampleAWSKey  = "AKIA" + "IOSFODNN7EXAMPLE"
	sampleGHToken = "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "123456"
)

// TestRelayWriteSecrets: a write whose texts (PR and issue titles, bodies,
// comments; REST bodies and GraphQL mutation input, inline or in
// variables) carry a secret is escalated as structural-secret-egress: the
// operator sees the masked excerpt, the record kind and location only;
// approval forwards it, denial does not.
func TestRelayWriteSecrets(t *testing.T) {
	gqlVars := func(q string, vars map[string]any) string {
		b, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
		return string(b)
	}
	tests := []struct {
		name        string
		method      string
		path        string
		body        string
		deny        bool // the human denies
		wantStatus  int
		wantWhere   string // "" : no finding
		wantExcerpt string
	}{
		{name: "issue comment body, approved", method: "POST", path: "/github/repos/acme/app/issues/1/comments",
			body: `{"body":"creds: ` + sampleAWSKey + `"}`, wantStatus: 201, wantWhere: "aws-access-key-id in field body of request body", wantExcerpt: "AKIA…MPLE"},
		{name: "pull request title, denied", method: "POST", path: "/github/repos/acme/app/pulls", deny: true,
			body: `{"title":"fix ` + sampleGHToken + `","head":"feature","base":"main"}`, wantStatus: 403, wantWhere: "github-token in field title of request body", wantExcerpt: "ghp_…3456"},
		{name: "pull request edit body, denied", method: "PATCH", path: "/github/repos/acme/app/pulls/11", deny: true,
			body: `{"body":"see ` + sampleAWSKey + `"}`, wantStatus: 403, wantWhere: "aws-access-key-id in field body of request body"},
		{name: "JSON escapes are decoded before scanning", method: "POST", path: "/github/repos/acme/app/issues/1/comments", deny: true,
			body: `{"body":"\u0041KIA` + sampleAWSKey[4:] + `"}`, wantStatus: 403, wantWhere: "aws-access-key-id in field body"},
		{name: "graphql comment, key in a variable", method: "POST", path: "/github/graphql", deny: true,
			body:       gqlVars(`mutation($b:String!){addComment(input:{subjectId:"I_5",body:$b}){clientMutationId}}`, map[string]any{"b": "token " + sampleGHToken}),
			wantStatus: 403, wantWhere: "github-token in field body of mutation input", wantExcerpt: "ghp_…3456"},
		{name: "graphql create, key inline with an escape", method: "POST", path: "/github/graphql",
			body:       gqlVars(`mutation{createPullRequest(input:{repositoryId:"R_app",title:"t",headRefName:"f",baseRefName:"main",body:"\u0041KIA`+sampleAWSKey[4:]+`"}){pullRequest{number}}}`, nil),
			wantStatus: 200, wantWhere: "aws-access-key-id in field body of mutation input"},
		{name: "clean comment is not asked about", method: "POST", path: "/github/repos/acme/app/issues/1/comments",
			body: `{"body":"AKIA is only a prefix"}`, wantStatus: 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			e.esc.deny = tt.deny
			e.gh.mu.Lock()
			e.gh.prs[11] = botLogin // opened by the gateway's account
			e.gh.mu.Unlock()
			code, body, _ := e.do(t, tt.method, tt.path, tt.body, map[string]string{"Content-Type": "application/json"})
			if code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", code, tt.wantStatus, body)
			}
			ds := e.sink.Decisions()
			d := ds[len(ds)-1]
			forwarded := false
			for _, g := range e.gh.requests() {
				if g.method == tt.method && !strings.Contains(g.body, "node(id:$id)") {
					forwarded = true
				}
			}
			if tt.wantWhere == "" {
				if e.esc.n != 0 || d.Rule == policy.RuleSecretEgress || !forwarded {
					t.Fatalf("clean write: %d escalations, rule %s, forwarded %v", e.esc.n, d.Rule, forwarded)
				}
				return
			}
			if e.esc.n != 1 {
				t.Fatalf("%d escalations, want 1", e.esc.n)
			}
			req := e.esc.reqs[0]
			if req.Rule != policy.RuleSecretEgress || !strings.Contains(req.Reason, tt.wantWhere) || !strings.Contains(req.Reason, tt.wantExcerpt) {
				t.Fatalf("the operator sees %s %q; want %q with %q", req.Rule, req.Reason, tt.wantWhere, tt.wantExcerpt)
			}
			if d.Rule != policy.RuleSecretEgress || !strings.Contains(d.Reason, tt.wantWhere) {
				t.Fatalf("recorded %s %q; want %s naming %q", d.Rule, d.Reason, policy.RuleSecretEgress, tt.wantWhere)
			}
			// The audit sink redacts arguments before storage (audit.Redact);
			// reasons are stored as they are.
			rec := d.Reason + d.Detail + string(audit.Redact(d.Args))
			for _, leak := range []string{sampleAWSKey, sampleGHToken, "AKIA…", "ghp_…"} {
				if strings.Contains(rec, leak) || strings.Contains(body, leak) || strings.Contains(req.Reason+string(req.Args), strings.TrimSuffix(leak, "…")+"IOSF") {
					t.Fatalf("%q leaked: record %s / answer %s", leak, rec, body)
				}
			}
			if forwarded == tt.deny {
				t.Fatalf("forwarded=%v with deny=%v", forwarded, tt.deny)
			}
		})
	}
}

// A key hidden in a field name is found, and the location never repeats it.
func TestRelaySecretInFieldName(t *testing.T) {
	det := secretscan.MustDefault()
	hits := scanJSON(det, map[string]any{"x": map[string]any{sampleAWSKey: "v"}})
	if len(hits) != 1 || hits[0].Kind != secretscan.KindAWSKeyID || strings.Contains(hits[0].Where, "IOSF") {
		t.Fatalf("hits %+v", hits)
	}
	var many []any
	for range maxScanStrings + 10 {
		many = append(many, "x")
	}
	hits = scanJSON(det, many)
	if len(hits) != 1 || hits[0].Kind != KindUnscanned {
		t.Fatalf("a request with too many strings: %+v", hits)
	}
}

// Two writes with the same arguments and different bodies are different
// exact calls: an escalation (and its reuse after a restart) covers the
// body it was asked about only.
func TestRelayWriteBindsBody(t *testing.T) {
	e := newEnv(t, false)
	e.esc.deny = true
	for _, b := range []string{`{"body":"one ` + sampleAWSKey + `"}`, `{"body":"two ` + sampleAWSKey + `"}`} {
		if code, body, _ := e.do(t, "POST", "/github/repos/acme/app/issues/1/comments", b, map[string]string{"Content-Type": "application/json"}); code != 403 {
			t.Fatalf("status %d: %s", code, body)
		}
	}
	if len(e.esc.reqs) != 2 || string(e.esc.reqs[0].Exact) == string(e.esc.reqs[1].Exact) || len(e.esc.reqs[0].Exact) == 0 {
		t.Fatalf("exact calls %q / %q: want two different ones", e.esc.reqs[0].Exact, e.esc.reqs[1].Exact)
	}
	d := e.sink.Decisions()[0]
	if !strings.Contains(string(d.Args), policy.DoorContentKey) {
		t.Fatalf("the record does not name the body's digest: %s", d.Args)
	}
}
