package githubrelay

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestClassifyREST(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, query string
		header                    http.Header
		action                    Action
		template, canon           string
		owner, repo               string
		number                    int
		err                       string // a refusal
	}{
		{name: "create PR", method: "POST", path: "/repos/acme/app/pulls", action: ActionPRCreate, template: "/repos/{owner}/{repo}/pulls", owner: "acme", repo: "app"},
		{name: "list PRs", method: "GET", path: "/repos/acme/app/pulls", query: "state=open", action: ActionPRList},
		{name: "view PR", method: "GET", path: "/repos/acme/app/pulls/12", action: ActionPRView, number: 12},
		{name: "HEAD is a GET", method: "HEAD", path: "/repos/acme/app/pulls/12", action: ActionPRView},
		{name: "edit PR", method: "PATCH", path: "/repos/acme/app/pulls/12", action: ActionPREdit, number: 12},
		{name: "comment", method: "POST", path: "/repos/acme/app/issues/3/comments", action: ActionIssueComment, number: 3},
		{name: "merge", method: "PUT", path: "/repos/acme/app/pulls/12/merge", action: ActionMerge},
		{name: "merge, owner in upper case", method: "PUT", path: "/repos/ACME/App/pulls/12/merge", action: ActionMerge, owner: "acme", repo: "app", canon: "/repos/acme/app/pulls/12/merge"},
		{name: "merge, literal in upper case", method: "PUT", path: "/REPOS/acme/app/PULLS/12/MERGE", action: ActionMerge},
		{name: "merge, trailing slash", method: "PUT", path: "/repos/acme/app/pulls/12/merge/", action: ActionMerge, canon: "/repos/acme/app/pulls/12/merge"},
		{name: "merge, double slashes", method: "PUT", path: "//repos//acme/app/pulls/12//merge", action: ActionMerge, canon: "/repos/acme/app/pulls/12/merge"},
		{name: "merge, percent-encoded letters", method: "PUT", path: "/repos/acme/app/pulls/12/m%65rge", action: ActionMerge},
		{name: "merge, dot segment", method: "PUT", path: "/repos/acme/app/pulls/12/x/../merge", err: "dot segment"},
		{name: "merge, encoded dot", method: "PUT", path: "/repos/acme/app/pulls/12/x/%2e%2e/merge", err: "encoded"},
		{name: "merge, encoded slash", method: "PUT", path: "/repos/acme/app/pulls/12%2fmerge", err: "encoded"},
		{name: "double encoding", method: "PUT", path: "/repos/acme/app/pulls/12/m%2565rge", err: "encoded"},
		{name: "merge, number with a sign", method: "PUT", path: "/repos/acme/app/pulls/+12/merge", err: "not a route"},
		{name: "merge, number with leading zero", method: "PUT", path: "/repos/acme/app/pulls/012/merge", err: "not a route"},
		{name: "merge via POST override header", method: "POST", path: "/repos/acme/app/pulls/12/merge", header: http.Header{"X-Http-Method-Override": {"PUT"}}, err: "X-HTTP-Method-Override"},
		{name: "override header in another case", method: "GET", path: "/repos/acme/app", header: http.Header{http.CanonicalHeaderKey("x-method-override"): {"DELETE"}}, err: "X-Method-Override"},
		{name: "_method parameter", method: "POST", path: "/repos/acme/app/pulls/12/merge", query: "_method=PUT", err: "_method"},
		{name: "merge via POST is unknown", method: "POST", path: "/repos/acme/app/pulls/12/merge", err: "not a route"},
		{name: "delete anything", method: "DELETE", path: "/repos/acme/app", action: ActionForbidden},
		{name: "delete a comment", method: "DELETE", path: "/repos/acme/app/issues/comments/1", action: ActionForbidden},
		{name: "hooks", method: "POST", path: "/repos/acme/app/hooks", action: ActionForbidden},
		{name: "deep admin", method: "PUT", path: "/repos/acme/app/actions/secrets/TOKEN", action: ActionForbidden},
		{name: "contents write", method: "PUT", path: "/repos/acme/app/contents/README.md", action: ActionForbidden},
		{name: "merges endpoint", method: "POST", path: "/repos/acme/app/merges", action: ActionForbidden},
		{name: "authorizations", method: "POST", path: "/authorizations", action: ActionForbidden},
		{name: "unknown write", method: "PUT", path: "/repos/acme/app/pulls/12/update-branch", err: "not a route"},
		{name: "user endpoint", method: "GET", path: "/user", err: "not a route"},
		{name: "graphql", method: "POST", path: "/graphql", action: ActionGraphQL},
		{name: "graphql GET", method: "GET", path: "/graphql", err: "not a route"},
		{name: "method TRACE", method: "TRACE", path: "/repos/acme/app", err: "method"},
		{name: "no leading slash", method: "GET", path: "repos/acme/app", err: "start with /"},
		{name: "control character", method: "GET", path: "/repos/acme/app%0a", err: "not accepted"},
		{name: "non-ASCII owner", method: "GET", path: "/repos/%D0%B0cme/app", err: "not accepted"},
		{name: "backslash", method: "GET", path: "/repos/acme\\app", err: "not accepted"},
		{name: "invalid escape", method: "GET", path: "/repos/acme/%zz", err: "percent-encoded"},
		{name: "long path", method: "GET", path: "/" + strings.Repeat("a", MaxPath), err: "longer than"},
		{name: "owner with invalid char", method: "GET", path: "/repos/ac~me/app", err: "not a route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClassifyREST(tc.method, tc.path, tc.query, tc.header)
			if refusedAsWanted(t, got, err, tc.err) {
				return
			}
			if got.Action != tc.action {
				t.Fatalf("action %q, want %q (%+v)", got.Action, tc.action, got)
			}
			if (tc.action == ActionMerge || tc.action == ActionForbidden) && got.Why == "" {
				t.Fatal("a refused action has no reason")
			}
			for _, c := range []struct{ got, want string }{{got.Template, tc.template}, {got.Path, tc.canon}, {got.Owner, tc.owner}, {got.Repo, tc.repo}} {
				if c.want != "" && c.got != c.want {
					t.Fatalf("%+v: %q, want %q", got, c.got, c.want)
				}
			}
			if tc.number != 0 && got.Number != tc.number {
				t.Fatalf("number %d, want %d", got.Number, tc.number)
			}
		})
	}
}

func TestClassifyGraphQL(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		mutations  []Action
		fields     string // fields of the first operation, comma-separated
		err        string
	}{
		{name: "query", body: `{"query":"query { repository(owner:\"a\", name:\"b\") { id } }"}`, fields: "repository"},
		{name: "shorthand query", body: `{"query":"{ viewer { login } }"}`, fields: "viewer"},
		{name: "create PR", body: `{"query":"mutation M($i: CreatePullRequestInput!) { createPullRequest(input: $i) { pullRequest { url } } }","variables":{"i":{"title":"t"}}}`, mutations: []Action{ActionPRCreate}, fields: "createPullRequest"},
		{name: "merge", body: `{"query":"mutation { mergePullRequest(input: {pullRequestId: \"x\"}) { clientMutationId } }"}`, err: "merging is not possible"},
		{name: "merge behind an alias", body: `{"query":"mutation { createPullRequest: mergePullRequest(input: {pullRequestId: \"x\"}) { clientMutationId } }"}`, err: "mutation mergePullRequest"},
		{name: "auto-merge", body: `{"query":"mutation { enablePullRequestAutoMerge(input: {pullRequestId: \"x\"}) { clientMutationId } }"}`, err: "merging"},
		{name: "merge queue", body: `{"query":"mutation { enqueuePullRequest(input: {pullRequestId: \"x\"}) { clientMutationId } }"}`, err: "merging"},
		{name: "merge in an inline fragment", body: `{"query":"mutation { ... on Mutation { mergePullRequest(input: {}) { clientMutationId } } }"}`, err: "mergePullRequest"},
		{name: "merge in a fragment spread", body: `{"query":"mutation { ...M } fragment M on Mutation { mergePullRequest(input: {}) { clientMutationId } }"}`, err: "mergePullRequest"},
		{name: "merge in a nested spread", body: `{"query":"mutation { ...A } fragment A on Mutation { ...B } fragment B on Mutation { mergePullRequest(input: {}) { clientMutationId } }"}`, err: "mergePullRequest"},
		{name: "merge skipped by a directive is still refused", body: `{"query":"mutation { mergePullRequest(input: {}) @skip(if: true) { clientMutationId } createPullRequest(input: {}) { clientMutationId } }"}`, err: "mergePullRequest"},
		{name: "merge in a second operation not selected", body: `{"query":"query Q { viewer { login } } mutation M { mergePullRequest(input: {}) { clientMutationId } }","operationName":"Q"}`, err: "mergePullRequest"},
		{name: "unknown mutation", body: `{"query":"mutation { addStar(input: {}) { clientMutationId } }"}`, err: "not on the gateway's list"},
		{name: "nested mutation-named field in a query is a read", body: `{"query":"{ repository(owner:\"a\",name:\"b\") { mergePullRequest: id } }"}`, fields: "repository"},
		{name: "subscription", body: `{"query":"subscription { x }"}`, err: "subscription operations"},
		{name: "batch", body: ` [{"query":"{ viewer { login } }"}]`, err: "batched"},
		{name: "two JSON values", body: `{"query":"{ viewer { login } }"} {"query":"mutation { mergePullRequest(input:{}) { clientMutationId } }"}`, err: "more than one JSON value"},
		{name: "no query", body: `{"variables":{}}`, err: "no query"},
		{name: "not JSON", body: `query { viewer { login } }`, err: "not a JSON object"},
		{name: "parse error", body: `{"query":"mutation { "}`, err: "does not parse"},
		{name: "several operations without a name", body: `{"query":"query A { viewer { login } } query B { viewer { id } }"}`, err: "several operations"},
		{name: "operationName names nothing", body: `{"query":"query A { viewer { login } }","operationName":"Z"}`, err: "names no operation"},
		{name: "undefined fragment", body: `{"query":"mutation { ...Z }"}`, err: "not defined"},
		{name: "fragment cycle", body: `{"query":"mutation { ...A } fragment A on Mutation { ...B } fragment B on Mutation { ...A }"}`, err: "spreads itself"},
		{name: "huge body", body: `{"query":"` + strings.Repeat(" ", MaxGraphQLBody) + `{ viewer { login } }"}`, err: "larger than"},
		{name: "too many tokens", body: `{"query":"{ viewer { ` + strings.Repeat("a ", MaxGraphQLTokens) + `} }"}`, err: "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClassifyGraphQL([]byte(tc.body))
			if refusedAsWanted(t, got, err, tc.err) {
				return
			}
			if len(got.Mutations) != len(tc.mutations) {
				t.Fatalf("mutations %v, want %v", got.Mutations, tc.mutations)
			}
			for i := range tc.mutations {
				if got.Mutations[i] != tc.mutations[i] {
					t.Fatalf("mutations %v, want %v", got.Mutations, tc.mutations)
				}
			}
			if f := strings.Join(got.Ops[0].Fields, ","); f != tc.fields {
				t.Fatalf("fields %q, want %q", f, tc.fields)
			}
		})
	}
}

// TestClassifyGraphQLFanOut: fragments that spread each other twice per
// level are expanded once each, not 2^n times.
func TestClassifyGraphQLFanOut(t *testing.T) {
	var b strings.Builder
	b.WriteString(`mutation { ...F0 } `)
	const n = 30
	for i := 0; i < n; i++ {
		b.WriteString("fragment F" + itoa(i) + " on Mutation { ...F" + itoa(i+1) + " ...F" + itoa(i+1) + " } ")
	}
	b.WriteString("fragment F" + itoa(n) + " on Mutation { createPullRequest(input: {}) { clientMutationId } }")
	body := `{"query":` + quote(b.String()) + `}`
	got, err := ClassifyGraphQL([]byte(body))
	if err != nil || len(got.Mutations) != 1 || got.Mutations[0] != ActionPRCreate {
		t.Fatalf("%+v, %v", got, err)
	}
}

// refusedAsWanted checks a classification's error: with want set, err must
// be an ErrRequest naming want, and it returns true (the case is done);
// else err must be nil.
func refusedAsWanted(t *testing.T, got any, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrRequest) {
			t.Fatalf("got %+v, %v; want a refusal with %q", got, err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
