package githubrelay

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCaseVariantAndDuplicateKeysRefused is the regression test for the
// parse differential of issue 24: Go's encoding/json matched "Query" to
// the query field and let a later duplicate win, GitHub reads keys exactly.
// A body carrying both was judged on one and executed on the other (a
// mergePullRequest ran, a PR the gateway did not open was closed, a token
// reached addComment past the secret scan). Each must be refused, recorded,
// and nothing of it may reach GitHub.
func TestCaseVariantAndDuplicateKeysRefused(t *testing.T) {
	e := newEnv(t, false)
	const (
		merge   = `"mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"`
		closeIt = `"mutation{closePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"`
		read    = `"{viewer{login}}"`
		comment = `"mutation($i:AddCommentInput!){addComment(input:$i){clientMutationId}}"`
	)
	tests := []struct{ name, path, body string }{
		{name: "query then Query (GitHub runs the merge)", path: "/github/graphql", body: `{"query":` + merge + `,"Query":` + read + `}`},
		{name: "Query then query", path: "/github/graphql", body: `{"Query":` + read + `,"query":` + merge + `}`},
		{name: "QUERY alone", path: "/github/graphql", body: `{"QUERY":` + read + `}`},
		{name: "close another's PR behind a read", path: "/github/graphql", body: `{"query":` + closeIt + `,"quEry":` + read + `}`},
		{name: "duplicate query, last wins in Go", path: "/github/graphql", body: `{"query":` + merge + `,"query":` + read + `}`},
		{name: "duplicate query via escape", path: "/github/graphql", body: `{"query":` + merge + `,"\u0071uery":` + read + `}`},
		{name: "variables and Variables (token past the scan)", path: "/github/graphql",
			body: `{"query":` + comment + `,"variables":{"i":{"subjectId":"PR_11","body":"ghp_0123456789abcdefghijABCDEFGHIJ012345"}},"Variables":{"i":{"subjectId":"PR_11","body":"clean"}}}`},
		{name: "duplicate variables", path: "/github/graphql",
			body: `{"query":` + comment + `,"variables":{"i":{"subjectId":"PR_11","body":"ghp_0123456789abcdefghijABCDEFGHIJ012345"}},"variables":{"i":{"subjectId":"PR_11","body":"clean"}}}`},
		{name: "duplicate input field inside variables", path: "/github/graphql",
			body: `{"query":` + comment + `,"variables":{"i":{"subjectId":"PR_11","body":"ghp_0123456789abcdefghijABCDEFGHIJ012345","body":"clean"}}}`},
		{name: "operationName and OperationName", path: "/github/graphql",
			body: `{"query":"query Q{viewer{login}} mutation M{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}","operationName":"M","OperationName":"Q"}`},
		{name: "unknown top-level key", path: "/github/graphql", body: `{"query":` + read + `,"extensions":{"persistedQuery":{"sha256Hash":"x"}}}`},
		{name: "trailing value", path: "/github/graphql", body: `{"query":` + read + `}{"query":` + merge + `}`},
		{name: "trailing garbage", path: "/github/graphql", body: `{"query":` + read + `} x`},
		{name: "invalid UTF-8", path: "/github/graphql", body: "{\"query\":\"{viewer{login}}\",\"x\":\"\xff\"}"},
		// REST bodies: the same class.
		{name: "rest state twice (close hides a reopen)", path: "/github/repos/acme/app/pulls/11", body: `{"state":"open","state":"closed"}`},
		{name: "rest title and Title", path: "/github/repos/acme/app/pulls/11", body: `{"title":"a","Title":"b"}`},
		{name: "rest body twice", path: "/github/repos/acme/app/issues/1/comments", body: `{"body":"ghp_0123456789abcdefghijABCDEFGHIJ012345","body":"clean"}`},
		{name: "rest trailing value", path: "/github/repos/acme/app/issues/1/comments", body: `{"body":"a"}{"body":"b"}`},
		{name: "rest wrong type", path: "/github/repos/acme/app/pulls", body: `{"title":["t"],"head":"feature","base":"main"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.gh.reset()
			method := "POST"
			if strings.Contains(tt.path, "/pulls/") {
				method = "PATCH"
			}
			code, body, _ := e.do(t, method, tt.path, tt.body, nil)
			if code != http.StatusForbidden || !strings.Contains(body, "IronCurtain refused") {
				t.Fatalf("status %d body %s", code, body)
			}
			for _, g := range e.gh.requests() {
				if g.method != http.MethodGet && !strings.Contains(g.body, "node(id:$id)") {
					t.Fatalf("GitHub received %s %s %s", g.method, g.path, g.body)
				}
			}
			d := e.sink.Decisions()[len(e.sink.Decisions())-1]
			if d.Decision != "deny" || d.Rule != RuleRequest {
				t.Fatalf("record %+v", d)
			}
		})
	}
	checkTokens(t, e)
}

// TestForwardsTheDecidedForm: what GitHub receives is the body re-encoded
// from what was decided (exact names, fixed order, no whitespace, no
// unknown members), never the bytes the agent sent; the query string is
// re-encoded the same way and Content-Type is the gateway's.
func TestForwardsTheDecidedForm(t *testing.T) {
	e := newEnv(t, false)
	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		wantPath, wantBody       string
	}{
		{name: "graphql read", method: "POST", path: "/github/graphql",
			body:     " {\n \"variables\" : {\"n\":\"app\", \"o\":\"acme\"},\t\"query\":\"query($o:String!,$n:String!){repository(owner:$o,name:$n){id}}\" }\n",
			wantPath: "/graphql",
			wantBody: `{"query":"query($o:String!,$n:String!){repository(owner:$o,name:$n){id}}","variables":{"n":"app","o":"acme"}}`},
		{name: "graphql with operationName", method: "POST", path: "/github/graphql",
			body:     `{"operationName":"V","query":"query V{viewer{login}}","variables":null}`,
			wantPath: "/graphql",
			wantBody: `{"query":"query V{viewer{login}}","operationName":"V"}`},
		{name: "graphql mutation", method: "POST", path: "/github/graphql",
			body:     `{"query":"mutation($i:AddCommentInput!){addComment(input:$i){clientMutationId}}", "variables":{"i":{"body":"hi", "subjectId":"I_5"}}}`,
			wantPath: "/graphql",
			wantBody: `{"query":"mutation($i:AddCommentInput!){addComment(input:$i){clientMutationId}}","variables":{"i":{"body":"hi","subjectId":"I_5"}}}`},
		{name: "rest comment", method: "POST", path: "/github/repos/acme/app/issues/1/comments",
			body: "{ \"body\" : \"hi\\u0021\" }  ", hdr: map[string]string{"Content-Type": "application/json; charset=UTF-8"},
			wantPath: "/repos/acme/app/issues/1/comments", wantBody: `{"body":"hi!"}`},
		{name: "rest query re-encoded", method: "GET", path: "/github/repos/acme/app/pulls?state=open&per_page=5&q=a+b%2Bc",
			wantPath: "/repos/acme/app/pulls?per_page=5&q=a+b%2Bc&state=open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.gh.reset()
			code, body, _ := e.do(t, tt.method, tt.path, tt.body, tt.hdr)
			if code >= 300 {
				t.Fatalf("status %d body %s", code, body)
			}
			var got *received
			for _, g := range e.gh.requests() {
				if g.method == tt.method && !strings.Contains(g.body, "node(id:$id)") {
					g := g
					got = &g
				}
			}
			if got == nil {
				t.Fatalf("nothing forwarded: %+v", e.gh.requests())
			}
			path := got.path
			if got.query != "" {
				path += "?" + got.query
			}
			if path != tt.wantPath || got.body != tt.wantBody {
				t.Fatalf("forwarded %s %q, want %s %q", path, got.body, tt.wantPath, tt.wantBody)
			}
			if tt.body != "" && got.contentType != "application/json; charset=utf-8" {
				t.Fatalf("forwarded Content-Type %q", got.contentType)
			}
		})
	}
	checkTokens(t, e)
}

// TestRepeatedParametersAndHeadersRefused: a query parameter given twice,
// a query string on a write, and a forwarded header sent twice (or a
// content type or encoding the relay does not read) are refused before
// anything is decided: the gateway would judge one value and GitHub might
// read another.
func TestRepeatedParametersAndHeadersRefused(t *testing.T) {
	e := newEnv(t, false)
	comment := `{"body":"hi"}`
	tests := []struct {
		name, method, path, body string
		hdr                      http.Header
		want                     string
	}{
		{name: "repeated parameter", method: "GET", path: "/github/repos/acme/app/pulls?state=open&state=closed", want: "more than once"},
		{name: "repeated parameter encoded", method: "GET", path: "/github/repos/acme/app/pulls?state=open&%73tate=closed", want: "more than once"},
		{name: "semicolon separator", method: "GET", path: "/github/repos/acme/app/pulls?state=open;state=closed", want: "malformed"},
		{name: "empty parameter name", method: "GET", path: "/github/repos/acme/app/pulls?=x", want: "name"},
		{name: "query on a write", method: "POST", path: "/github/repos/acme/app/issues/1/comments?body=x", body: comment, want: "query string"},
		{name: "query on graphql", method: "POST", path: "/github/graphql?query=%7Bviewer%7Blogin%7D%7D", body: `{"query":"{viewer{login}}"}`, want: "query string"},
		{name: "accept twice", method: "GET", path: "/github/repos/acme/app", hdr: http.Header{"Accept": {"a/b", "c/d"}}, want: "Accept"},
		{name: "api version twice", method: "GET", path: "/github/repos/acme/app", hdr: http.Header{"X-Github-Api-Version": {"2022-11-28", "2099-01-01"}}, want: "X-Github-Api-Version"},
		{name: "content type twice", method: "POST", path: "/github/repos/acme/app/issues/1/comments", body: comment, hdr: http.Header{"Content-Type": {"application/json", "text/plain"}}, want: "Content-Type"},
		{name: "form content type", method: "POST", path: "/github/repos/acme/app/issues/1/comments", body: comment, hdr: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, want: "Content-Type"},
		{name: "utf-16 charset", method: "POST", path: "/github/repos/acme/app/issues/1/comments", body: comment, hdr: http.Header{"Content-Type": {"application/json; charset=utf-16"}}, want: "Content-Type"},
		{name: "gzip body", method: "POST", path: "/github/repos/acme/app/issues/1/comments", body: comment, hdr: http.Header{"Content-Encoding": {"gzip"}}, want: "Content-Encoding"},
		{name: "method override lower case", method: "POST", path: "/github/repos/acme/app/issues/1/comments", body: comment, hdr: http.Header{"x-http-method-override": {"PUT"}}, want: "Method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.gh.reset()
			req, err := http.NewRequest(tt.method, e.relay.URL+"/", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tt.path
			if tt.body == "" {
				req.Body = nil
			}
			for k, v := range tt.hdr {
				req.Header[k] = v
			}
			req.Header.Set("Authorization", "token "+agentTok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := new(strings.Builder)
			_, _ = io.Copy(b, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(b.String(), tt.want) {
				t.Fatalf("status %d body %s, want a refusal naming %q", resp.StatusCode, b, tt.want)
			}
			if got := e.gh.requests(); len(got) != 0 {
				t.Fatalf("GitHub received %+v", got)
			}
		})
	}
	checkTokens(t, e)
}

// TestAuthorizationOnce: two Authorization headers are refused (401), even
// when one holds the agent's token, and nothing reaches GitHub.
func TestAuthorizationOnce(t *testing.T) {
	e := newEnv(t, false)
	for _, pair := range [][]string{{"token " + agentTok, "token nope"}, {"token nope", "token " + agentTok}, {"token " + agentTok, "token " + agentTok}} {
		req, err := http.NewRequest("GET", e.relay.URL+"/github/repos/acme/app/pulls/1", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header["Authorization"] = pair
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%v: status %d", pair, resp.StatusCode)
		}
	}
	if got := e.gh.requests(); len(got) != 0 {
		t.Fatalf("GitHub received %+v", got)
	}
}
