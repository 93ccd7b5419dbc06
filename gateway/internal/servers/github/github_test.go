package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"ironcurtain.dev/gateway/internal/audit/audittest"
)

const testToken = "ghp_TESTTOKEN0123456789abcdefghijklmnop"

// fakeGitHub is a tiny in-memory GitHub REST API.
type fakeGitHub struct {
	t  *testing.T
	mu sync.Mutex
	// prs by number in acme/app; author logins decide ownership.
	prs      map[int]map[string]any
	issues   map[int]map[string]any
	comments map[int][]map[string]any
	calls    []string // "METHOD path"
	userGets int
	login    string
	failUser bool
}

func newFakeGitHub(t *testing.T) (*fakeGitHub, *httptest.Server) {
	f := &fakeGitHub{
		t:     t,
		login: "ironcurtain-bot",
		prs: map[int]map[string]any{
			1: pr(1, "Gateway change", "IronCurtain-Bot", "feature", "main"),
			2: pr(2, "Someone else's change", "octocat", "other", "main"),
		},
		issues: map[int]map[string]any{
			7: {"number": 7, "title": "Bug", "state": "open", "user": map[string]any{"login": "octocat"},
				"body": "It breaks. token=" + testToken, "comments": 2, "html_url": "https://github.com/acme/app/issues/7",
				"labels": []any{map[string]any{"name": "bug"}}},
		},
		comments: map[int][]map[string]any{
			7: {
				{"id": 1, "body": "first", "user": map[string]any{"login": "a"}},
				{"id": 2, "body": "second", "user": map[string]any{"login": "b"}},
			},
		},
	}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return f, ts
}

func pr(n int, title, author, head, base string) map[string]any {
	return map[string]any{
		"number": n, "title": title, "state": "open", "body": "body of " + strconv.Itoa(n),
		"user":     map[string]any{"login": author},
		"head":     map[string]any{"ref": head, "label": "acme:" + head},
		"base":     map[string]any{"ref": base},
		"html_url": fmt.Sprintf("https://github.com/acme/app/pull/%d", n),
	}
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	write := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	notFound := func() { write(http.StatusNotFound, map[string]any{"message": "Not Found"}) }
	var body map[string]any
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		if len(b) > 0 {
			_ = json.Unmarshal(b, &body)
		}
	}
	switch {
	case r.Method == "GET" && r.URL.Path == "/user":
		f.userGets++
		if f.failUser {
			write(http.StatusInternalServerError, map[string]any{"message": "boom"})
			return
		}
		write(200, map[string]any{"login": f.login})
	case len(parts) >= 4 && parts[0] == "repos" && parts[1] == "acme" && parts[2] == "app":
		rest := parts[3:]
		switch {
		case len(rest) == 1 && rest[0] == "pulls" && r.Method == "POST":
			if body["base"] == "nonexistent" {
				write(http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
					"errors": []any{map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"}}})
				return
			}
			n := 10 + len(f.prs)
			p := pr(n, body["title"].(string), f.login, body["head"].(string), body["base"].(string))
			p["draft"] = body["draft"]
			f.prs[n] = p
			write(201, p)
		case len(rest) == 1 && rest[0] == "pulls" && r.Method == "GET":
			var out []any
			for i := 1; i <= 2; i++ {
				if st := r.URL.Query().Get("state"); st == "" || st == "open" || st == "all" {
					out = append(out, f.prs[i])
				}
			}
			write(200, out)
		case len(rest) == 2 && rest[0] == "pulls":
			n, _ := strconv.Atoi(rest[1])
			p, ok := f.prs[n]
			if !ok {
				notFound()
				return
			}
			switch r.Method {
			case "GET":
				write(200, p)
			case "PATCH":
				for _, k := range []string{"title", "body", "state"} {
					if v, ok := body[k]; ok {
						p[k] = v
					}
				}
				if b, ok := body["base"].(string); ok {
					p["base"] = map[string]any{"ref": b}
				}
				write(200, p)
			default:
				notFound()
			}
		case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "merge":
			f.t.Errorf("merge endpoint called: %s %s", r.Method, r.URL.Path)
			write(200, map[string]any{"merged": true})
		case len(rest) == 2 && rest[0] == "issues" && r.Method == "GET":
			n, _ := strconv.Atoi(rest[1])
			is, ok := f.issues[n]
			if !ok {
				notFound()
				return
			}
			write(200, is)
		case len(rest) == 3 && rest[0] == "issues" && rest[2] == "comments":
			n, _ := strconv.Atoi(rest[1])
			if _, isPR := f.prs[n]; !isPR && f.issues[n] == nil {
				notFound()
				return
			}
			if r.Method == "GET" {
				write(200, f.comments[n])
				return
			}
			c := map[string]any{"id": 100 + len(f.comments[n]), "body": body["body"], "user": map[string]any{"login": f.login}}
			f.comments[n] = append(f.comments[n], c)
			write(201, c)
		default:
			notFound()
		}
	default:
		notFound()
	}
}

func (f *fakeGitHub) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func newTestServer(t *testing.T, url string, logs *bytes.Buffer) *Server {
	t.Helper()
	var lg *slog.Logger
	if logs != nil {
		lg = slog.New(slog.NewJSONHandler(logs, nil))
	}
	s, err := New(Config{APIURL: url, Token: testToken, Logger: lg, Sink: &audittest.Sink{}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGitHubTools(t *testing.T) {
	tests := []struct {
		name      string
		tool      string
		args      map[string]any
		isError   bool
		contains  []string
		wantCalls []string // the API calls, in order
	}{
		{
			name: "create a pull request", tool: "pr_create",
			args:      map[string]any{"owner": "acme", "repo": "app", "title": "Add x", "head": "feature-x", "base": "main", "body": "Adds x.", "draft": true},
			contains:  []string{`"title": "Add x"`, `"author": "ironcurtain-bot"`, `"head": "acme:feature-x"`},
			wantCalls: []string{"POST /repos/acme/app/pulls"},
		},
		{
			name: "create with a validation error", tool: "pr_create", isError: true,
			args:      map[string]any{"owner": "acme", "repo": "app", "title": "t", "head": "h", "base": "nonexistent"},
			contains:  []string{"pr_create failed: GitHub answered 422: Validation Failed; base invalid"},
			wantCalls: []string{"POST /repos/acme/app/pulls"},
		},
		{
			name: "view a pull request", tool: "pr_view",
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 2.0},
			contains:  []string{`"number": 2`, `"author": "octocat"`, `"body": "body of 2"`},
			wantCalls: []string{"GET /repos/acme/app/pulls/2"},
		},
		{
			name: "view a missing pull request", tool: "pr_view", isError: true,
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 99.0},
			contains:  []string{"pr_view failed: not found"},
			wantCalls: []string{"GET /repos/acme/app/pulls/99"},
		},
		{
			name: "list pull requests", tool: "pr_list",
			args:      map[string]any{"owner": "acme", "repo": "app", "state": "all", "per_page": 10.0},
			contains:  []string{`"number": 1`, `"number": 2`},
			wantCalls: []string{"GET /repos/acme/app/pulls"},
		},
		{
			name: "comment on a pull request", tool: "pr_comment",
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 2.0, "body": "LGTM"},
			contains:  []string{`"body": "LGTM"`},
			wantCalls: []string{"GET /repos/acme/app/pulls/2", "POST /repos/acme/app/issues/2/comments"},
		},
		{
			name: "comment on an issue number via pr_comment is refused", tool: "pr_comment", isError: true,
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 7.0, "body": "x"},
			contains:  []string{"not found"},
			wantCalls: []string{"GET /repos/acme/app/pulls/7"},
		},
		{
			name: "edit own pull request", tool: "pr_edit",
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 1.0, "title": "Better title"},
			contains:  []string{`"title": "Better title"`},
			wantCalls: []string{"GET /user", "GET /repos/acme/app/pulls/1", "PATCH /repos/acme/app/pulls/1"},
		},
		{
			name: "edit someone else's pull request is refused", tool: "pr_edit", isError: true,
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 2.0, "body": "hijacked"},
			contains:  []string{`pr_edit refused: pull request #2 in acme/app was opened by "octocat", not by the gateway's account`},
			wantCalls: []string{"GET /user", "GET /repos/acme/app/pulls/2"},
		},
		{
			name: "edit with nothing to change", tool: "pr_edit", isError: true,
			args:     map[string]any{"owner": "acme", "repo": "app", "number": 1.0},
			contains: []string{"give at least one of title, body or base"},
		},
		{
			name: "close own pull request", tool: "pr_close",
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 1.0},
			contains:  []string{`"state": "closed"`},
			wantCalls: []string{"GET /user", "GET /repos/acme/app/pulls/1", "PATCH /repos/acme/app/pulls/1"},
		},
		{
			name: "close someone else's pull request is refused", tool: "pr_close", isError: true,
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 2.0},
			contains:  []string{"pr_close refused", "only closes its own pull requests"},
			wantCalls: []string{"GET /user", "GET /repos/acme/app/pulls/2"},
		},
		{
			name: "view an issue with comments", tool: "issue_view",
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 7.0},
			contains:  []string{`"title": "Bug"`, `"labels": [`, `"body": "second"`},
			wantCalls: []string{"GET /repos/acme/app/issues/7", "GET /repos/acme/app/issues/7/comments"},
		},
		{
			name: "comment on an issue", tool: "issue_comment",
			args:      map[string]any{"owner": "acme", "repo": "app", "number": 7.0, "body": "On it."},
			contains:  []string{`"body": "On it."`},
			wantCalls: []string{"POST /repos/acme/app/issues/7/comments"},
		},
		{name: "merge does not exist", tool: "pr_merge", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "number": 1.0}, contains: []string{"unknown tool pr_merge"}},
		{name: "path traversal in owner", tool: "pr_view", isError: true, args: map[string]any{"owner": "../../user", "repo": "app", "number": 1.0}, contains: []string{"not a valid GitHub account name"}},
		{name: "slash in repo", tool: "pr_view", isError: true, args: map[string]any{"owner": "acme", "repo": "app/pulls/1/merge", "number": 1.0}, contains: []string{"not a valid GitHub repository name"}},
		{name: "repo that trims to a dot", tool: "pr_view", isError: true, args: map[string]any{"owner": "acme", "repo": "..git", "number": 1.0}, contains: []string{"not a valid GitHub repository name"}},
		{name: "dot-dot repo", tool: "pr_view", isError: true, args: map[string]any{"owner": "acme", "repo": "..", "number": 1.0}, contains: []string{"not a valid GitHub repository name"}},
		{name: "query in owner", tool: "pr_list", isError: true, args: map[string]any{"owner": "acme?x=1", "repo": "app"}, contains: []string{"not a valid GitHub account name"}},
		{name: "option-like branch", tool: "pr_create", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "title": "t", "head": "--force", "base": "main"}, contains: []string{"head \"--force\" is not a valid branch name"}},
		{name: "number zero", tool: "pr_view", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "number": 0.0}, contains: []string{"number must be a positive integer"}},
		{name: "fractional number", tool: "pr_view", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "number": 1.5}, contains: []string{"number must be a positive integer"}},
		{name: "number as string", tool: "pr_view", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "number": "1"}, contains: []string{"number must be a positive integer"}},
		{name: "unknown argument", tool: "pr_close", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "number": 1.0, "merge": true}, contains: []string{`unknown argument "merge"`}},
		{name: "missing required", tool: "issue_comment", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "number": 7.0}, contains: []string{"body is required"}},
		{name: "bad state", tool: "pr_list", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "state": "merged"}, contains: []string{"state must be one of open, closed, all"}},
		{name: "title too long", tool: "pr_create", isError: true, args: map[string]any{"owner": "acme", "repo": "app", "title": strings.Repeat("t", maxTitle+1), "head": "h", "base": "main"}, contains: []string{"title is longer than 256 characters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, ts := newFakeGitHub(t)
			s := newTestServer(t, ts.URL, nil)
			res, err := s.Call(context.Background(), tt.tool, tt.args)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			text := res.Content[0].Text
			if res.IsError != tt.isError {
				t.Errorf("IsError = %v, want %v: %s", res.IsError, tt.isError, text)
			}
			for _, c := range tt.contains {
				if !strings.Contains(text, c) {
					t.Errorf("result lacks %q:\n%s", c, text)
				}
			}
			if got := fake.callLog(); strings.Join(got, "\n") != strings.Join(tt.wantCalls, "\n") {
				t.Errorf("API calls = %q, want %q", got, tt.wantCalls)
			}
		})
	}
}

func TestIdentityFetchedOnceAndFailureNotCached(t *testing.T) {
	fake, ts := newFakeGitHub(t)
	s := newTestServer(t, ts.URL, nil)
	fake.failUser = true
	res, _ := s.Call(context.Background(), "pr_close", map[string]any{"owner": "acme", "repo": "app", "number": 1.0})
	if !res.IsError {
		t.Fatal("pr_close ran without knowing the gateway's identity")
	}
	fake.mu.Lock()
	fake.failUser = false
	fake.mu.Unlock()
	for i := 0; i < 3; i++ {
		res, _ = s.Call(context.Background(), "pr_edit", map[string]any{"owner": "acme", "repo": "app", "number": 1.0, "body": "b" + strconv.Itoa(i)})
		if res.IsError {
			t.Fatalf("pr_edit: %s", res.Content[0].Text)
		}
	}
	if fake.userGets != 2 {
		t.Fatalf("GET /user made %d times, want 2 (one failure, then once cached)", fake.userGets)
	}
}

func TestTokenNeverInResultsOrLogs(t *testing.T) {
	_, ts := newFakeGitHub(t)
	var logs bytes.Buffer
	s := newTestServer(t, ts.URL, &logs)
	// The issue body quotes the token (as a hostile issue could).
	res, err := s.Call(context.Background(), "issue_view", map[string]any{"owner": "acme", "repo": "app", "number": 7.0})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Content[0].Text, testToken) {
		t.Fatal("token in result")
	}
	if !strings.Contains(res.Content[0].Text, "[redacted]") {
		t.Fatalf("expected redaction marker in %s", res.Content[0].Text)
	}
	// A transport failure is logged; the log must not carry the token either.
	bad, err := New(Config{APIURL: "http://127.0.0.1:1/", Token: testToken, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Sink: &audittest.Sink{}})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = bad.Call(context.Background(), "pr_view", map[string]any{"owner": "acme", "repo": "app", "number": 1.0})
	if !res.IsError || !strings.Contains(res.Content[0].Text, "could not reach GitHub") {
		t.Fatalf("result = %+v", res)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("token in logs")
	}
}

func TestBadCredentials(t *testing.T) {
	_, ts := newFakeGitHub(t)
	s, err := New(Config{APIURL: ts.URL, Token: "wrong-token", Sink: &audittest.Sink{}})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := s.Call(context.Background(), "pr_view", map[string]any{"owner": "acme", "repo": "app", "number": 1.0})
	if !res.IsError || !strings.Contains(res.Content[0].Text, "GitHub refused the gateway's credentials") {
		t.Fatalf("result = %+v", res)
	}
}

func TestNoToken(t *testing.T) {
	fake, ts := newFakeGitHub(t)
	s, err := New(Config{APIURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := s.Call(context.Background(), "pr_view", map[string]any{"owner": "acme", "repo": "app", "number": 1.0})
	if !res.IsError || !strings.Contains(res.Content[0].Text, "no GitHub token") {
		t.Fatalf("result = %+v", res)
	}
	if len(fake.callLog()) != 0 {
		t.Fatal("an API call was made without a token")
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "ftp url", cfg: Config{APIURL: "ftp://x/"}},
		{name: "relative url", cfg: Config{APIURL: "/api"}},
		{name: "credentials in url", cfg: Config{APIURL: "https://u:p@api.example.com/"}},
		{name: "token with newline", cfg: Config{Token: "abc\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Fatal("New accepted an invalid configuration")
			}
		})
	}
}

func TestToolsDeclareAnnotations(t *testing.T) {
	want := []string{"pr_create", "pr_view", "pr_list", "pr_comment", "pr_edit", "pr_close", "issue_view", "issue_comment"}
	tools := Tools()
	if len(tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(tools), len(want))
	}
	for i, tool := range tools {
		t.Run(tool.Name, func(t *testing.T) {
			if tool.Name != want[i] {
				t.Fatalf("tool %d = %s, want %s", i, tool.Name, want[i])
			}
			if strings.Contains(tool.Name, "merge") {
				t.Fatal("a merge tool exists")
			}
			a := tool.Annotation
			if a.Server != ServerName || a.Tool != tool.Name || a.Comment == "" {
				t.Fatalf("annotation = %+v", a)
			}
			var schema struct {
				Properties map[string]any `json:"properties"`
			}
			if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
				t.Fatal(err)
			}
			if len(schema.Properties) != len(a.Args) {
				t.Fatalf("schema has %d properties, annotation %d args", len(schema.Properties), len(a.Args))
			}
			for _, arg := range a.Args {
				if _, ok := schema.Properties[arg.Name]; !ok {
					t.Errorf("annotated arg %s missing from schema", arg.Name)
				}
			}
			owner, _ := a.Arg("owner")
			repo, _ := a.Arg("repo")
			if len(owner.Default) != 1 || owner.Default[0] != "github-owner" || len(repo.Default) != 1 || repo.Default[0] != "github-repo" {
				t.Fatalf("owner/repo roles = %v %v", owner.Default, repo.Default)
			}
		})
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("acme", "app", "main", 1.0)
	f.Add("../x", "a/b", "--exec=x", -1.0)
	f.Add("a-", ".git", "refs/heads/main", 1e300)
	f.Fuzz(func(t *testing.T, owner, repo, branch string, number float64) {
		a, err := parseArgs(toolsByName["pr_create"], map[string]any{"owner": owner, "repo": repo, "title": "t", "head": branch, "base": "main"})
		if err == nil {
			if !ownerRE.MatchString(a.owner) || strings.ContainsAny(a.owner+a.repo, "/?#%\\") || a.repo == ".." || a.repo == "." {
				t.Fatalf("accepted owner %q repo %q", a.owner, a.repo)
			}
			if strings.HasPrefix(a.str["head"], "-") {
				t.Fatalf("accepted option-like head %q", a.str["head"])
			}
		}
		v, err := parseArgs(toolsByName["pr_view"], map[string]any{"owner": "acme", "repo": "app", "number": number})
		if err == nil && v.number < 1 {
			t.Fatalf("accepted number %v as %d", number, v.number)
		}
	})
}
