package main

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// ghLogin is the fake GitHub account of the gateway's token; pull request
// 1 belongs to someone else ("human").
const ghLogin = "ironcurtain-e2e-bot"

// fakeGitHub is just enough of GitHub's REST and GraphQL API for gh pr
// create, view, edit and merge and gh api, for clients that present token
// (the gateway's). Pull requests live in memory. It answers whatever it is
// asked: refusing is the gateway's job, and the suite asserts from the
// request log what reached it.
type fakeGitHub struct {
	token string
	mu    sync.Mutex
	prs   map[int]string // number → author
	next  int
}

func newFakeGitHub(token string) *fakeGitHub {
	return &fakeGitHub{token: token, prs: map[int]string{1: "human"}, next: 10}
}

// serve answers one request and returns the log note: the method, path
// and, for GraphQL, the root field names the document mentions (never a
// credential).
func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) string {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		tok, _ = strings.CutPrefix(auth, "Bearer ")
	}
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(f.token)) != 1 {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return "github: wrong token " + r.Method + " " + r.URL.Path
	}
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	note := "github: token ok " + r.Method + " " + p
	switch {
	case r.Method == http.MethodGet && p == "/user":
		fmt.Fprintf(w, `{"login":%q}`, ghLogin)
	case r.Method == http.MethodPost && p == "/graphql":
		note += " " + f.graphql(w, b)
	case r.Method == http.MethodPost && p == "/repos/acme/app/pulls":
		n := f.open()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"number":%d,"user":{"login":%q}}`, n, ghLogin)
	case strings.HasPrefix(p, "/repos/acme/app/pulls/"):
		n, err := strconv.Atoi(strings.TrimPrefix(p, "/repos/acme/app/pulls/"))
		author, ok := f.author(n)
		if err != nil || !ok {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return note
		}
		fmt.Fprintf(w, `{"number":%d,"state":"open","user":{"login":%q}}`, n, author)
	case p == "/repos/acme/app/pulls" || p == "/repos/acme/app/issues":
		fmt.Fprint(w, `[]`)
	case p == "/repos/acme/app":
		fmt.Fprint(w, `{"full_name":"acme/app","name":"app","owner":{"login":"acme"},"default_branch":"main"}`)
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
	return note
}

func (f *fakeGitHub) open() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.prs[f.next] = ghLogin
	return f.next
}

func (f *fakeGitHub) author(n int) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.prs[n]
	return a, ok
}

// graphqlWords are the names the log note reports when a document
// mentions them.
var graphqlWords = []string{"createPullRequest", "updatePullRequest", "mergePullRequest",
	"enablePullRequestAutoMerge", "closePullRequest", "addComment", "RepositoryInfo", "pullRequest(number:", "node(id:"}

// graphql answers the queries gh makes (repository info, a pull request
// by number, node lookups) and createPullRequest; anything else gets empty
// data. It returns the words of graphqlWords the document mentions.
func (f *fakeGitHub) graphql(w http.ResponseWriter, body []byte) string {
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	_ = json.Unmarshal(body, &req)
	var seen []string
	for _, word := range graphqlWords {
		if strings.Contains(req.Query, word) {
			seen = append(seen, word)
		}
	}
	note := "graphql [" + strings.Join(seen, " ") + "]"
	switch {
	case strings.Contains(req.Query, "RepositoryInfo"):
		fmt.Fprint(w, `{"data":{"repository":{"id":"R_app","name":"app","owner":{"login":"acme"},"hasIssuesEnabled":true,"description":"","hasWikiEnabled":false,"viewerPermission":"WRITE","defaultBranchRef":{"name":"main"},"parent":null,"mergeCommitAllowed":true,"rebaseMergeAllowed":true,"squashMergeAllowed":true}}}`)
	case strings.Contains(req.Query, "createPullRequest"):
		n := f.open()
		fmt.Fprintf(w, `{"data":{"createPullRequest":{"pullRequest":{"id":"PR_%d","number":%d,"url":"https://github.com/acme/app/pull/%d"}}}}`, n, n, n)
	case strings.Contains(req.Query, "projectItems"):
		fmt.Fprint(w, `{"data":{"repository":{"pullRequest":{"projectItems":{"nodes":[],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}}`)
	case strings.Contains(req.Query, "pullRequest(number:"):
		n := 11
		for _, k := range []string{"pr_number", "number"} {
			if v, ok := req.Variables[k].(float64); ok {
				n = int(v)
			}
		}
		author, ok := f.author(n)
		if !ok {
			fmt.Fprint(w, `{"data":{"repository":{"pullRequest":null}},"errors":[{"type":"NOT_FOUND","message":"Could not resolve to a PullRequest"}]}`)
			return note
		}
		fmt.Fprintf(w, `{"data":{"repository":{"pullRequest":{"id":"PR_%d","number":%d,"title":"t","body":"","state":"OPEN","isDraft":false,"headRefName":"feature","baseRefName":"main","mergeable":"MERGEABLE","isCrossRepository":false,"headRepositoryOwner":{"login":"acme"},"headRepository":{"name":"app"},"url":"https://github.com/acme/app/pull/%d","author":{"login":%q}}}}}`, n, n, n, author)
	case strings.Contains(req.Query, "node(id:"):
		id, _ := req.Variables["id"].(string)
		switch {
		case id == "R_app":
			fmt.Fprint(w, `{"data":{"node":{"__typename":"Repository","nameWithOwner":"acme/app"}}}`)
		case strings.HasPrefix(id, "PR_"):
			fmt.Fprintf(w, `{"data":{"node":{"__typename":"PullRequest","number":%s,"repository":{"nameWithOwner":"acme/app"}}}}`, strings.TrimPrefix(id, "PR_"))
		default:
			fmt.Fprint(w, `{"data":{"node":null}}`)
		}
	default:
		fmt.Fprint(w, `{"data":{}}`)
	}
	return note
}
