package githubrelay

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// checkTokens fails if the agent's token reached the fake API or a request
// came without the gateway's, or if the gateway's token is in a record.
func checkTokens(t *testing.T, e *env) {
	t.Helper()
	for _, g := range e.gh.requests() {
		if strings.Contains(g.auth+g.body+g.path, agentTok) {
			t.Fatalf("the agent's token reached GitHub: %+v", g)
		}
		if g.auth != "token "+gatewayTok && g.auth != "Bearer "+gatewayTok {
			t.Fatalf("a request reached GitHub without the gateway's token: %+v", g)
		}
	}
	if strings.Contains(e.sink.all(), gatewayTok) {
		t.Fatal("the gateway's token is in a record")
	}
}

// TestRefusedNeverReachGitHub: merge in every spelling, administration,
// secrets, deletions and unknown mutations are refused, recorded, and
// nothing of them reaches the API.
func TestRefusedNeverReachGitHub(t *testing.T) {
	e := newEnv(t, false)
	gql := func(q string, extra ...string) string {
		m := map[string]any{"query": q}
		if len(extra) == 2 {
			m[extra[0]] = extra[1]
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		rule                     string
	}{
		{name: "rest merge", method: "PUT", path: "/github/repos/acme/app/pulls/11/merge", body: "{}", rule: RuleMerge},
		{name: "rest merge upper case", method: "PUT", path: "/github/REPOS/Acme/APP/Pulls/11/MERGE", body: "{}", rule: RuleMerge},
		{name: "rest merge trailing slash", method: "PUT", path: "/github/repos/acme/app/pulls/11/merge/", body: "{}", rule: RuleMerge},
		{name: "rest merge double slash", method: "PUT", path: "/github//repos//acme/app/pulls/11//merge", body: "{}", rule: RuleMerge},
		{name: "rest merge percent-encoded", method: "PUT", path: "/github/repos/acme/app/pulls/11/%6d%65%72%67%65", body: "{}", rule: RuleMerge},
		{name: "rest merge encoded slash", method: "PUT", path: "/github/repos/acme/app/pulls/11%2fmerge", body: "{}", rule: RuleRequest},
		// The agent port's ServeMux cleans the dot segment; the merge is then refused.
		{name: "rest merge dot segment", method: "PUT", path: "/github/repos/acme/app/pulls/11/x/../merge", body: "{}", rule: RuleMerge},
		{name: "method override header", method: "POST", path: "/github/repos/acme/app/pulls/11/merge", body: "{}", hdr: map[string]string{"X-HTTP-Method-Override": "PUT"}, rule: RuleRequest},
		{name: "method override query", method: "POST", path: "/github/repos/acme/app/pulls?_method=PUT", body: "{}", rule: RuleRequest},
		{name: "merges api", method: "POST", path: "/github/repos/acme/app/merges", body: `{"base":"main","head":"x"}`, rule: RuleForbidden},
		{name: "secrets", method: "GET", path: "/github/repos/acme/app/actions/secrets", rule: RuleForbidden},
		{name: "collaborators", method: "PUT", path: "/github/repos/acme/app/collaborators/evil", body: "{}", rule: RuleForbidden},
		{name: "hooks", method: "POST", path: "/github/repos/acme/app/hooks", body: "{}", rule: RuleForbidden},
		{name: "workflow dispatch", method: "POST", path: "/github/repos/acme/app/actions/workflows/x/dispatches", body: "{}", rule: RuleForbidden},
		{name: "delete repo", method: "DELETE", path: "/github/repos/acme/app", rule: RuleForbidden},
		{name: "delete branch ref", method: "DELETE", path: "/github/repos/acme/app/git/refs/heads/main", rule: RuleForbidden},
		{name: "tokens", method: "POST", path: "/github/authorizations", body: "{}", rule: RuleForbidden},
		{name: "unknown route", method: "GET", path: "/github/user/keys", rule: RuleRequest},
		{name: "reopen", method: "PATCH", path: "/github/repos/acme/app/pulls/11", body: `{"state":"open"}`, rule: RuleRequest},
		{name: "pr from issue", method: "POST", path: "/github/repos/acme/app/pulls", body: `{"issue":3,"head":"x","base":"main"}`, rule: RuleRequest},
		{name: "graphql merge", method: "POST", path: "/github/graphql", body: gql(`mutation{mergePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}`), rule: RuleMerge},
		{name: "graphql merge alias", method: "POST", path: "/github/graphql", body: gql(`mutation{c: mergePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}`), rule: RuleMerge},
		{name: "graphql merge fragment", method: "POST", path: "/github/graphql", body: gql(`mutation{...F} fragment F on Mutation{mergePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}`), rule: RuleMerge},
		{name: "graphql merge inline fragment", method: "POST", path: "/github/graphql", body: gql(`mutation{... on Mutation{mergePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}}`), rule: RuleMerge},
		{name: "graphql merge second operation", method: "POST", path: "/github/graphql", body: gql(`query Q{viewer{login}} mutation M{mergePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}`, "operationName", "Q"), rule: RuleMerge},
		{name: "graphql auto-merge", method: "POST", path: "/github/graphql", body: gql(`mutation{enablePullRequestAutoMerge(input:{pullRequestId:"PR_11"}){clientMutationId}}`), rule: RuleMerge},
		{name: "graphql unlisted mutation", method: "POST", path: "/github/graphql", body: gql(`mutation{deleteRepository(input:{repositoryId:"R_app"}){clientMutationId}}`), rule: RuleRequest},
		{name: "graphql unknown mutation", method: "POST", path: "/github/graphql", body: gql(`mutation{futureThing(input:{}){x}}`), rule: RuleRequest},
		{name: "graphql allowed plus merge", method: "POST", path: "/github/graphql", body: gql(`mutation{a: addComment(input:{subjectId:"PR_11",body:"x"}){clientMutationId} b: mergePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}`), rule: RuleMerge},
		{name: "graphql same mutation twice", method: "POST", path: "/github/graphql", body: gql(`mutation{a: closePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId} b: closePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}`), rule: RuleRequest},
		{name: "graphql batched", method: "POST", path: "/github/graphql", body: `[` + gql(`{viewer{login}}`) + `]`, rule: RuleRequest},
		{name: "graphql node query", method: "POST", path: "/github/graphql", body: gql(`{node(id:"R_other"){id}}`), rule: RuleRequest},
		{name: "graphql subscription", method: "POST", path: "/github/graphql", body: gql(`subscription{x}`), rule: RuleRequest},
		{name: "graphql query beside a mutation", method: "POST", path: "/github/graphql", body: gql(`query Q{repository(owner:"secret",name:"x"){id}} mutation M{addComment(input:{subjectId:"PR_11",body:"x"}){clientMutationId}}`, "operationName", "Q"), rule: RuleRequest},
		{name: "graphql viewer repositories", method: "POST", path: "/github/graphql", body: gql(`{viewer{login repositories(first:100){nodes{nameWithOwner}}}}`), rule: RuleRequest},
		{name: "graphql viewer fragment", method: "POST", path: "/github/graphql", body: gql(`{viewer{... on User{organizations(first:5){nodes{login}}}}}`), rule: RuleRequest},
		{name: "graphql two repositories", method: "POST", path: "/github/graphql", body: gql(`{a: repository(owner:"acme",name:"app"){id} b: repository(owner:"other",name:"x"){id}}`), rule: RuleRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.gh.reset()
			before := len(e.sink.Decisions())
			code, body, _ := e.do(t, tt.method, tt.path, tt.body, tt.hdr)
			if code != http.StatusForbidden || !strings.Contains(body, "IronCurtain refused") {
				t.Fatalf("status %d body %s", code, body)
			}
			if got := e.gh.requests(); len(got) != 0 {
				t.Fatalf("GitHub received %+v", got)
			}
			ds := e.sink.Decisions()
			if len(ds) != before+1 {
				t.Fatalf("%d decisions recorded, want 1", len(ds)-before)
			}
			d := ds[len(ds)-1]
			if d.Decision != "deny" || d.Rule != tt.rule || d.Server != "github" {
				t.Fatalf("record %+v", d)
			}
			if !strings.Contains(string(d.Args), `"door":"github-relay"`) || !strings.Contains(string(d.Args), `"method":"`+tt.method+`"`) {
				t.Fatalf("record args %s", d.Args)
			}
		})
	}
	checkTokens(t, e)
}

// TestAllowedAndOwnership: create, view, list and comment are relayed;
// edit and close only on pull requests the gateway opened (through the
// relay here), in REST and GraphQL.
func TestAllowedAndOwnership(t *testing.T) {
	e := newEnv(t, false)
	code, body, hdr := e.do(t, "POST", "/github/repos/acme/app/pulls", `{"title":"t","head":"feature","base":"main","body":"secret body text"}`, nil)
	if code != http.StatusCreated || !strings.Contains(body, `"number":11`) {
		t.Fatalf("create: %d %s", code, body)
	}
	if hdr.Get("X-Secret-Hop") != "" || hdr.Get("X-Github-Request-Id") != "fake" {
		t.Fatalf("response headers %v", hdr)
	}
	d := e.sink.Decisions()[len(e.sink.Decisions())-1]
	if d.Tool != "pr_create" || d.Decision != "allow" || !strings.Contains(string(d.Args), `"head":"feature"`) ||
		strings.Contains(string(d.Args), "secret body text") || !strings.Contains(string(d.Args), `"route":"/repos/{owner}/{repo}/pulls"`) {
		t.Fatalf("create record %+v %s", d, d.Args)
	}
	gqlVars := func(q string, vars map[string]any) string {
		b, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
		return string(b)
	}
	tests := []struct {
		name, method, path, body string
		want                     int
		tool, rule               string
	}{
		{name: "view", method: "GET", path: "/github/repos/acme/app/pulls/1", want: 200, tool: "pr_view"},
		{name: "list", method: "GET", path: "/github/repos/acme/app/pulls?state=open", want: 200, tool: "pr_list"},
		{name: "repo read", method: "GET", path: "/github/repos/acme/app", want: 200, tool: "pr_list"},
		{name: "comment", method: "POST", path: "/github/repos/acme/app/issues/1/comments", body: `{"body":"hi"}`, want: 201, tool: "issue_comment"},
		{name: "edit own", method: "PATCH", path: "/github/repos/acme/app/pulls/11", body: `{"title":"new"}`, want: 200, tool: "pr_edit"},
		{name: "close own", method: "PATCH", path: "/github/repos/acme/app/pulls/11", body: `{"state":"closed"}`, want: 200, tool: "pr_close"},
		{name: "edit other", method: "PATCH", path: "/github/repos/acme/app/pulls/1", body: `{"title":"new"}`, want: 403, tool: "pr_edit", rule: RuleNotOwnPR},
		{name: "edit unknown (ownership cannot be told)", method: "PATCH", path: "/github/repos/acme/app/pulls/99", body: `{"title":"new"}`, want: 403, tool: "pr_edit", rule: RuleNotOwnPR},
		{name: "close other", method: "PATCH", path: "/github/repos/acme/app/pulls/1", body: `{"state":"closed"}`, want: 403, tool: "pr_close", rule: RuleNotOwnPR},
		{name: "graphql query", method: "POST", path: "/github/graphql", body: gqlVars(`query($o:String!,$n:String!){repository(owner:$o,name:$n){pullRequests(first:5){nodes{number}}} viewer{login}}`, map[string]any{"o": "acme", "n": "app"}), want: 200, tool: "pr_list"},
		{name: "graphql create", method: "POST", path: "/github/graphql", body: gqlVars(`mutation($in:CreatePullRequestInput!){createPullRequest(input:$in){pullRequest{number}}}`, map[string]any{"in": map[string]any{"repositoryId": "R_app", "title": "t", "headRefName": "f", "baseRefName": "main"}}), want: 200, tool: "pr_create"},
		{name: "graphql comment on issue", method: "POST", path: "/github/graphql", body: gqlVars(`mutation{addComment(input:{subjectId:"I_5",body:"x"}){clientMutationId}}`, nil), want: 200, tool: "issue_comment"},
		{name: "graphql comment on pr", method: "POST", path: "/github/graphql", body: gqlVars(`mutation{addComment(input:{subjectId:"PR_1",body:"x"}){clientMutationId}}`, nil), want: 200, tool: "pr_comment"},
		{name: "graphql close own", method: "POST", path: "/github/graphql", body: gqlVars(`mutation{x: closePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}`, nil), want: 200, tool: "pr_close"},
		{name: "graphql close other", method: "POST", path: "/github/graphql", body: gqlVars(`mutation{x: closePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}`, nil), want: 403, tool: "pr_close", rule: RuleNotOwnPR},
		{name: "graphql edit other via variable", method: "POST", path: "/github/graphql", body: gqlVars(`mutation($id:ID!){updatePullRequest(input:{pullRequestId:$id,title:"x"}){clientMutationId}}`, map[string]any{"id": "PR_1"}), want: 403, tool: "pr_edit", rule: RuleNotOwnPR},
		{name: "graphql unresolvable node", method: "POST", path: "/github/graphql", body: gqlVars(`mutation{closePullRequest(input:{pullRequestId:"nope"}){clientMutationId}}`, nil), want: 403, tool: "pr_edit", rule: RuleRequest},
		{name: "graphql node of wrong type", method: "POST", path: "/github/graphql", body: gqlVars(`mutation{createPullRequest(input:{repositoryId:"PR_1",title:"t",headRefName:"f",baseRefName:"main"}){clientMutationId}}`, nil), want: 403, tool: "pr_create", rule: RuleRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.gh.reset()
			code, body, _ := e.do(t, tt.method, tt.path, tt.body, nil)
			if code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
			d := e.sink.Decisions()[len(e.sink.Decisions())-1]
			if d.Tool != tt.tool {
				t.Fatalf("recorded tool %q, want %q (%s)", d.Tool, tt.tool, d.Args)
			}
			forwarded := false
			for _, g := range e.gh.requests() {
				if g.method == tt.method && (g.path == strings.SplitN(strings.TrimPrefix(tt.path, "/github"), "?", 2)[0]) && !strings.Contains(g.body, "node(id:$id)") {
					forwarded = true
				}
			}
			if tt.rule != "" {
				if d.Decision != "deny" || d.Rule != tt.rule {
					t.Fatalf("record %+v", d)
				}
				if forwarded {
					t.Fatal("a refused request reached GitHub")
				}
			} else if d.Decision != "allow" || !forwarded {
				t.Fatalf("decision %s forwarded %v", d.Decision, forwarded)
			}
		})
	}
	checkTokens(t, e)
}

// TestAuthentication: no token, an unknown token, and the GitHub token
// itself are refused; Bearer and token schemes both work.
func TestAuthentication(t *testing.T) {
	e := newEnv(t, false)
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{name: "none", auth: "", want: 401},
		{name: "unknown", auth: "token nope", want: 401},
		{name: "gateway token", auth: "token " + gatewayTok, want: 401},
		{name: "basic", auth: "Basic YTpi", want: 401},
		{name: "token scheme", auth: "token " + agentTok, want: 200},
		{name: "bearer scheme", auth: "Bearer " + agentTok, want: 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := e.do(t, "GET", "/github/repos/acme/app/pulls/1", "", map[string]string{"Authorization": tt.auth})
			if code != tt.want {
				t.Fatalf("status %d want %d: %s", code, tt.want, body)
			}
		})
	}
	checkTokens(t, e)
}

// TestBasePolicy: under the shipped base policy reads are allowed, opening
// a pull request escalates (approved here) and merge stays impossible.
func TestBasePolicy(t *testing.T) {
	e := newEnv(t, true)
	if code, body, _ := e.do(t, "GET", "/github/repos/acme/app/pulls/1", "", nil); code != 200 {
		t.Fatalf("view: %d %s", code, body)
	}
	if d := e.sink.Decisions()[len(e.sink.Decisions())-1]; d.Decision != "allow" || d.Rule != "allow-github-reads" {
		t.Fatalf("view record %+v", d)
	}
	if code, body, _ := e.do(t, "POST", "/github/repos/acme/app/pulls", `{"title":"t","head":"feature","base":"main"}`, nil); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if d := e.sink.Decisions()[len(e.sink.Decisions())-1]; d.Decision != "escalate" || d.Rule != "escalate-github-publish" || e.esc.n != 1 {
		t.Fatalf("create record %+v (escalations %d)", d, e.esc.n)
	}
	if code, _, _ := e.do(t, "PATCH", "/github/repos/acme/app/pulls/11", `{"state":"closed"}`, nil); code != 200 {
		t.Fatalf("close own: %d", code)
	}
	if d := e.sink.Decisions()[len(e.sink.Decisions())-1]; d.Decision != "allow" || d.Rule != "allow-github-close-own-pr" {
		t.Fatalf("close record %+v", d)
	}
	e.gh.reset()
	if code, _, _ := e.do(t, "PUT", "/github/repos/acme/app/pulls/11/merge", `{}`, nil); code != 403 {
		t.Fatalf("merge: %d", code)
	}
	if len(e.gh.requests()) != 0 {
		t.Fatal("merge reached GitHub")
	}
	checkTokens(t, e)
}

// TestOperatorDenial: under the base policy an escalated pr_create that
// the operator denies is refused and never reaches GitHub.
func TestOperatorDenial(t *testing.T) {
	e := newEnv(t, true)
	e.esc.deny = true
	code, body, _ := e.do(t, "POST", "/github/repos/acme/app/pulls", `{"title":"t","head":"feature","base":"main"}`, nil)
	if code != http.StatusForbidden || !strings.Contains(body, "IronCurtain") {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, g := range e.gh.requests() {
		if g.method == "POST" {
			t.Fatalf("GitHub received %+v", g)
		}
	}
	if d := e.sink.Decisions()[len(e.sink.Decisions())-1]; d.Decision != "escalate" || e.esc.n != 1 {
		t.Fatalf("record %+v", d)
	}
	checkTokens(t, e)
}

// TestBodiesBoundedAndOutcomes: bodies over the bounds are refused before
// anything is forwarded; GitHub's own error statuses pass through to the
// agent unchanged and are the call's recorded outcome.
func TestBodiesBoundedAndOutcomes(t *testing.T) {
	e := newEnv(t, false)
	big := `{"title":"t","head":"f","base":"main","body":"` + strings.Repeat("x", DefaultMaxRESTBody) + `"}`
	if code, body, _ := e.do(t, "POST", "/github/repos/acme/app/pulls", big, nil); code != http.StatusForbidden || !strings.Contains(body, "larger than") {
		t.Fatalf("big REST body: %d %.200s", code, body)
	}
	bigQ := `{"query":"{viewer{login}}","variables":{"x":"` + strings.Repeat("x", MaxGraphQLBody) + `"}}`
	if code, body, _ := e.do(t, "POST", "/github/graphql", bigQ, nil); code != http.StatusForbidden || !strings.Contains(body, "larger than") {
		t.Fatalf("big GraphQL body: %d %.200s", code, body)
	}
	if len(e.gh.requests()) != 0 {
		t.Fatalf("GitHub received %+v", e.gh.requests())
	}
	code, body, _ := e.do(t, "GET", "/github/repos/acme/app/pulls/99", "", nil)
	if code != http.StatusNotFound || !strings.Contains(body, "Not Found") {
		t.Fatalf("missing PR: %d %s", code, body)
	}
	d := e.sink.Decisions()[len(e.sink.Decisions())-1]
	if o := e.sink.Outcome(d.CallID); o == nil || o.Status != "error" || !strings.Contains(o.Error, "GitHub answered 404") {
		t.Fatalf("outcome %+v", o)
	}
	if code, _, _ := e.do(t, "GET", "/github/repos/acme/app/pulls/1", "", nil); code != http.StatusOK {
		t.Fatalf("view: %d", code)
	}
	d = e.sink.Decisions()[len(e.sink.Decisions())-1]
	if o := e.sink.Outcome(d.CallID); o == nil || o.Status != "ok" {
		t.Fatalf("outcome %+v", o)
	}
}

// TestNoGatewayToken: without a GitHub token configured every request is
// refused and recorded, and nothing is sent upstream.
func TestNoGatewayToken(t *testing.T) {
	e := newEnv(t, false)
	h, err := New(Config{APIURL: e.gh.srv.URL + "/"}, Deps{Gate: e.hub, Auth: tokenAuth{}, Owner: e.owner})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/github/repos/acme/app/pulls/1", nil)
	req.Header.Set("Authorization", "token "+agentTok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "no GitHub token") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if d := e.sink.Decisions(); len(d) != 1 || d[0].Rule != RuleNoToken {
		t.Fatalf("records %+v", d)
	}
	if len(e.gh.requests()) != 0 {
		t.Fatal("a request was sent upstream")
	}
}

// TestCallTimeoutMidStream: when the call timeout ends while GitHub's
// answer is still streaming, the relay stops, records the timeout, and
// never writes to the response after (or beside) its handler (run with
// -race; before the wait for the forwarder, the pipeline's goroutine could
// still be copying into the response when the handler wrote its error).
func TestCallTimeoutMidStream(t *testing.T) {
	e := newEnvTimeout(t, false, 300*time.Millisecond)
	for i := 0; i < 3; i++ {
		start := time.Now()
		code, body, _ := e.do(t, "GET", "/github/repos/acme/app/pulls/77", "", nil)
		if code != http.StatusOK || strings.Contains(body, `"state"`) {
			t.Fatalf("status %d body %q", code, body)
		}
		if time.Since(start) > 1500*time.Millisecond {
			t.Fatalf("the relay waited %s for a call that timed out at 300ms", time.Since(start))
		}
		d := e.sink.Decisions()[len(e.sink.Decisions())-1]
		if o := e.sink.Outcome(d.CallID); o == nil || o.Status != "timed_out" {
			t.Fatalf("outcome %+v", o)
		}
	}
}

// TestEgressRows: each exchange with GitHub is an egress row of kind
// github: a forwarded request carries its call's id, the node lookup of a
// mutation the session's; a refused request has none.
func TestEgressRows(t *testing.T) {
	e := newEnv(t, false)
	if code, _, _ := e.do(t, "GET", "/github/repos/acme/app/pulls/1", "", nil); code != 200 {
		t.Fatalf("view: %d", code)
	}
	call := e.sink.Decisions()[len(e.sink.Decisions())-1].CallID
	rows := e.sink.Egress()
	if len(rows) != 1 || rows[0].Kind != "github" || rows[0].ToolCallID != call || rows[0].SessionID != "s1" || rows[0].Method != "GET" || rows[0].BytesDown == 0 {
		t.Fatalf("egress rows %+v", rows)
	}
	body := `{"query":"mutation{addComment(input:{subjectId:\"I_5\",body:\"x\"}){clientMutationId}}"}`
	if code, _, _ := e.do(t, "POST", "/github/graphql", body, nil); code != 200 {
		t.Fatalf("comment: %d", code)
	}
	call = e.sink.Decisions()[len(e.sink.Decisions())-1].CallID
	rows = e.sink.Egress()[1:]
	if len(rows) != 2 || rows[0].ToolCallID != "" || rows[0].SessionID != "s1" || !strings.Contains(rows[0].Reason, "node lookup") ||
		rows[1].ToolCallID != call || rows[1].Method != "POST" {
		t.Fatalf("egress rows %+v %+v", rows[0], rows[len(rows)-1])
	}
	if code, _, _ := e.do(t, "PUT", "/github/repos/acme/app/pulls/11/merge", "{}", nil); code != 403 {
		t.Fatalf("merge: %d", code)
	}
	if n := len(e.sink.Egress()); n != 3 {
		t.Fatalf("%d egress rows after a refusal, want 3", n)
	}
	checkTokens(t, e)
}
