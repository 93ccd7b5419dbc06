package githubrelay

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRelayGraphQL: whatever the body, what the relay forwards to the
// GraphQL endpoint is the decided form of the body it was given (its
// re-encoding by ClassifyGraphQL, never the bytes sent), classifies without error,
// holds at most one mutation field, on the allowlist, and never a merge;
// the agent's token never reaches GitHub.
func FuzzRelayGraphQL(f *testing.F) {
	for _, s := range []string{
		`{"query":"{viewer{login}}"}`,
		`{"query":"mutation{mergePullRequest(input:{pullRequestId:\"PR_11\"}){clientMutationId}}"}`,
		`{"query":"mutation($i:AddCommentInput!){addComment(input:$i){clientMutationId}}","variables":{"i":{"subjectId":"PR_11","body":"x"}}}`,
		`{"query":"mutation{a:closePullRequest(input:{pullRequestId:\"PR_11\"}){clientMutationId} ...F} fragment F on Mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"}`,
		`{"query":"query Q{repository(owner:\"acme\",name:\"app\"){id}} mutation M{closePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}","operationName":"Q"}`,
		`{"query":"mutation{updatePullRequest(input:{pullRequestId:\"PR_11\",state:CLOSED}){clientMutationId}}"}`,
	} {
		f.Add(s)
	}
	e := newEnv(f, false)
	f.Fuzz(func(t *testing.T, body string) {
		e.gh.reset()
		req := httptest.NewRequest("POST", "/github/graphql", strings.NewReader(body))
		req.Header.Set("Authorization", "token "+agentTok)
		e.h.ServeHTTP(httptest.NewRecorder(), req)
		for _, g := range e.gh.requests() {
			if strings.Contains(g.auth+g.body, agentTok) {
				t.Fatalf("the agent's token reached GitHub: %+v", g)
			}
			if g.path != "/graphql" {
				if g.method != http.MethodGet {
					t.Fatalf("GitHub received %s %s", g.method, g.path)
				}
				continue // the ownership check's reads
			}
			given, gerr := ClassifyGraphQL([]byte(body))
			if strings.Contains(g.body, "node(id:$id)") && (gerr != nil || g.body != string(given.Forward)) {
				continue // the relay's own node lookup
			}
			if gerr != nil {
				t.Fatalf("forwarded %q for a body the classifier refuses (%v): %q", g.body, gerr, body)
			}
			if g.body != string(given.Forward) {
				t.Fatalf("forwarded %q, want the decided form %q of %q", g.body, given.Forward, body)
			}
			c, err := ClassifyGraphQL([]byte(g.body))
			if err != nil {
				t.Fatalf("forwarded a body the classifier refuses: %v", err)
			}
			muts := mutationFields(c.doc)
			if len(muts) > 1 {
				t.Fatalf("forwarded %d mutation fields", len(muts))
			}
			for _, m := range muts {
				if _, ok := Mutations[m.Name]; !ok {
					t.Fatalf("forwarded mutation %s", m.Name)
				}
			}
			for _, m := range muts {
				if strings.Contains(strings.ToLower(m.Name), "merge") {
					t.Fatalf("forwarded a merge: %s", m.Name)
				}
			}
		}
	})
}

// FuzzRelayREST: whatever the method, path and body, GitHub never
// receives a merge, a DELETE, an administration route or the agent's
// token, and whatever it receives went through a route template.
func FuzzRelayREST(f *testing.F) {
	for _, s := range []struct{ m, p, b string }{
		{"PUT", "/github/repos/acme/app/pulls/11/merge", "{}"},
		{"PUT", "/github/repos/acme/app/pulls/11/m%65rge/", "{}"},
		{"PATCH", "/github/repos/acme/app/pulls/11", `{"state":"closed"}`},
		{"PATCH", "/github/repos/acme/app/pulls/1", `{"title":"x"}`},
		{"POST", "/github/repos/acme/app/pulls", `{"title":"t","head":"f","base":"main"}`},
		{"GET", "/api/v3/repos/acme/app", ""},
		{"DELETE", "/github/repos/acme/app", ""},
	} {
		f.Add(s.m, s.p, s.b)
	}
	e := newEnv(f, false)
	f.Fuzz(func(t *testing.T, method, path, body string) {
		req, err := http.NewRequest(method, "http://gateway"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		e.gh.reset()
		req.Header.Set("Authorization", "token "+agentTok)
		e.h.ServeHTTP(httptest.NewRecorder(), req)
		for _, g := range e.gh.requests() {
			if strings.Contains(g.auth+g.body+g.path, agentTok) {
				t.Fatalf("the agent's token reached GitHub: %+v", g)
			}
			low := strings.ToLower(g.path)
			if g.method == http.MethodDelete || g.method == http.MethodPut || strings.HasSuffix(low, "/merge") && g.method != http.MethodGet ||
				strings.Contains(low, "/hooks") || strings.Contains(low, "/secrets") || strings.Contains(low, "/collaborators") {
				t.Fatalf("GitHub received %s %s", g.method, g.path)
			}
			if g.method == http.MethodGet && g.path == "/user" {
				continue // the gateway's identity, for the ownership check
			}
			if g.path == "/graphql" {
				if _, err := ClassifyGraphQL([]byte(g.body)); err != nil {
					t.Fatalf("forwarded a GraphQL body the classifier refuses: %v", err)
				}
				continue
			}
			rt, err := ClassifyREST(g.method, g.path, "", http.Header{})
			if err != nil || rt.Action == ActionMerge || rt.Action == ActionForbidden {
				t.Fatalf("forwarded %s %s: %+v %v", g.method, g.path, rt, err)
			}
		}
	})
}
