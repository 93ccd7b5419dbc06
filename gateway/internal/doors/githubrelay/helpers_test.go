package githubrelay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit/audittest"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	ghsrv "ironcurtain.dev/gateway/internal/servers/github"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policies/base"
	"ironcurtain.dev/gateway/policy"
)

const (
	agentTok   = "agent-token-0123456789"
	gatewayTok = "ghp_gateway_secret_token_abcdef"
	botLogin   = "ic-bot"
)

// received is one request the fake GitHub API got.
type received struct {
	method, path, auth, body string
	query, contentType       string // the raw query and the Content-Type header
}

// fakeGitHub is a GitHub API (REST and GraphQL) that records what it
// received. Pull request 1 was opened by a human; the ones it creates are
// the gateway account's.
type fakeGitHub struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []received
	prs  map[int]string // number -> author
	next int
}

func newFakeGitHub(t testing.TB) *fakeGitHub {
	f := &fakeGitHub{prs: map[int]string{1: "human"}, next: 10}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.got = append(f.got, received{method: r.Method, path: r.URL.EscapedPath(), auth: r.Header.Get("Authorization"), body: string(b),
		query: r.URL.RawQuery, contentType: r.Header.Get("Content-Type")})
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "token "+gatewayTok && r.Header.Get("Authorization") != "Bearer "+gatewayTok {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Github-Request-Id", "fake")
	w.Header().Set("Connection", "X-Secret-Hop")
	w.Header().Set("X-Secret-Hop", "must not reach the agent")
	p := r.URL.Path
	switch {
	case r.Method == "GET" && p == "/user":
		fmt.Fprintf(w, `{"login":%q}`, botLogin)
	case r.Method == "POST" && p == "/graphql":
		f.graphql(w, string(b))
	case r.Method == "POST" && p == "/repos/acme/app/pulls":
		f.mu.Lock()
		f.next++
		n := f.next
		f.prs[n] = botLogin
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"number":%d,"user":{"login":%q}}`, n, botLogin)
	case p == "/repos/acme/app/pulls/77":
		// A slow answer: part of the body, then a pause.
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"number":77,`)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `"state":"open"}`)
	case strings.HasPrefix(p, "/repos/acme/app/pulls/"):
		n, err := strconv.Atoi(strings.TrimPrefix(p, "/repos/acme/app/pulls/"))
		f.mu.Lock()
		author, ok := f.prs[n]
		f.mu.Unlock()
		if err != nil || !ok {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"number":%d,"state":"open","user":{"login":%q}}`, n, author)
	case strings.HasPrefix(p, "/repos/acme/app/issues/") && r.Method == "POST":
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":1,"body":"ok"}`)
	case p == "/repos/acme/app/pulls" || p == "/repos/acme/app/issues":
		fmt.Fprint(w, `[]`)
	case p == "/repos/acme/app":
		fmt.Fprint(w, `{"full_name":"acme/app"}`)
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
}

// graphql answers node lookups (R_app: acme/app; PR_<n>: pull request n;
// I_<n>: issue n) and anything else with empty data.
func (f *fakeGitHub) graphql(w http.ResponseWriter, body string) {
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	_ = json.Unmarshal([]byte(body), &req)
	if strings.Contains(req.Query, "RepositoryInfo") {
		fmt.Fprint(w, `{"data":{"repository":{"id":"R_app","name":"app","owner":{"login":"acme"},"hasIssuesEnabled":true,"description":"","hasWikiEnabled":false,"viewerPermission":"WRITE","defaultBranchRef":{"name":"main"},"parent":null,"mergeCommitAllowed":true,"rebaseMergeAllowed":true,"squashMergeAllowed":true}}}`)
		return
	}
	if strings.Contains(req.Query, "createPullRequest") {
		fmt.Fprint(w, `{"data":{"createPullRequest":{"pullRequest":{"id":"PR_12","url":"https://github.com/acme/app/pull/12"}}}}`)
		return
	}
	if strings.Contains(req.Query, "projectItems") {
		fmt.Fprint(w, `{"data":{"repository":{"pullRequest":{"projectItems":{"nodes":[],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}}`)
		return
	}
	if strings.Contains(req.Query, "pullRequest(number:") {
		// What gh pr merge / view / close / edit / comment look a pull
		// request up with.
		n := 11
		for _, k := range []string{"pr_number", "number"} {
			if v, ok := req.Variables[k].(float64); ok {
				n = int(v)
			}
		}
		f.mu.Lock()
		author := f.prs[n]
		f.mu.Unlock()
		fmt.Fprintf(w, `{"data":{"repository":{"pullRequest":{"id":"PR_%d","number":%d,"title":"t","body":"","state":"OPEN","isDraft":false,"headRefName":"feature","baseRefName":"main","mergeable":"MERGEABLE","isCrossRepository":false,"headRepositoryOwner":{"login":"acme"},"headRepository":{"name":"app"},"url":"https://github.com/acme/app/pull/%d","author":{"login":%q}}}}}`, n, n, n, author)
		return
	}
	if !strings.Contains(req.Query, "node(id:$id)") {
		fmt.Fprint(w, `{"data":{}}`)
		return
	}
	id, _ := req.Variables["id"].(string)
	switch {
	case id == "R_app":
		fmt.Fprint(w, `{"data":{"node":{"__typename":"Repository","nameWithOwner":"acme/app"}}}`)
	case strings.HasPrefix(id, "PR_"):
		fmt.Fprintf(w, `{"data":{"node":{"__typename":"PullRequest","number":%s,"repository":{"nameWithOwner":"acme/app"}}}}`, strings.TrimPrefix(id, "PR_"))
	case strings.HasPrefix(id, "I_"):
		fmt.Fprintf(w, `{"data":{"node":{"__typename":"Issue","number":%s,"repository":{"nameWithOwner":"acme/app"}}}}`, strings.TrimPrefix(id, "I_"))
	case id == "U_x":
		fmt.Fprint(w, `{"data":{"node":{"__typename":"User"}}}`)
	default:
		fmt.Fprint(w, `{"data":{"node":null}}`)
	}
}

func (f *fakeGitHub) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

func (f *fakeGitHub) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = nil
}

// memSink records audit events.
type memSink struct{ audittest.Sink }

func (s *memSink) all() string {
	b, _ := json.Marshal(s.Events())
	return string(b)
}

type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, tok string) (session.Session, error) {
	if tok == agentTok {
		return session.Session{ID: "s1", Name: "agent"}, nil
	}
	return session.Session{}, session.ErrUnknownToken
}

// approver approves every escalation and counts them.
type approver struct {
	mu   sync.Mutex
	n    int
	deny bool
	reqs []escalation.Request
}

func (a *approver) Escalate(_ context.Context, req escalation.Request) (escalation.Result, error) {
	a.mu.Lock()
	a.n++
	a.reqs = append(a.reqs, req)
	deny := a.deny
	a.mu.Unlock()
	if deny {
		return escalation.Result{ID: req.ID, Approved: false, Status: "denied", DecidedBy: "test", Reason: "not now"}, nil
	}
	return escalation.Result{ID: req.ID, Approved: true, Status: "approved", DecidedBy: "test"}, nil
}

// env is the relay in front of a fake GitHub, with the github tool server.
type env struct {
	gh    *fakeGitHub
	relay *httptest.Server
	mux   *http.ServeMux
	h     *Handler
	hub   *gate.Gate
	owner Owner
	sink  *memSink
	esc   *approver
}

func newEnv(t testing.TB, useBase bool) *env {
	t.Helper()
	return newEnvTimeout(t, useBase, time.Minute)
}

// newEnvTimeout is newEnv with the hub's call timeout.
func newEnvTimeout(t testing.TB, useBase bool, callTimeout time.Duration) *env {
	t.Helper()
	e := &env{gh: newFakeGitHub(t), sink: &memSink{}, esc: &approver{}}
	srv, err := ghsrv.New(ghsrv.Config{APIURL: e.gh.srv.URL + "/", Token: gatewayTok, Sink: e.sink})
	if err != nil {
		t.Fatal(err)
	}
	var eng *policy.Engine
	if useBase {
		eng = baseEngine(t)
	} else {
		var anns []policy.ToolAnnotation
		for _, tool := range srv.Tools() {
			anns = append(anns, tool.Annotation)
		}
		eng, err = policy.New(&policy.CompiledPolicy{Rules: []policy.CompiledRule{{Name: "allow-everything", Then: policy.Allow, Reason: "test"}}},
			nil, nil, policy.Settings{Sandbox: t.TempDir(), Annotations: anns}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
		if err != nil {
			t.Fatal(err)
		}
	}
	hub, err := gate.New(gate.Config{CallTimeout: callTimeout},
		gate.Deps{Servers: []servers.Server{srv}, Policy: eng, Escalator: e.esc, Audit: e.sink})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{APIURL: e.gh.srv.URL + "/", Token: gatewayTok}, Deps{Gate: hub, Auth: tokenAuth{}, Owner: srv, Audit: e.sink, Secrets: eng})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range h.Patterns() {
		mux.Handle(p, h)
	}
	e.mux, e.h, e.hub, e.owner = mux, h, hub, srv
	e.relay = httptest.NewServer(mux)
	t.Cleanup(e.relay.Close)
	return e
}

// do sends a raw request to the relay (path as written on the wire).
func (e *env) do(t testing.TB, method, path, body string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, e.relay.URL+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = path // sent as is, no cleaning
	if body == "" {
		req.Body = nil
	}
	req.Header.Set("Authorization", "token "+agentTok)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// baseEngine loads the shipped base policy with the github tools' annotations.
func baseEngine(t testing.TB) *policy.Engine {
	t.Helper()
	read := func(name string) []byte {
		b, err := base.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cp, err := policy.ParseCompiledPolicy(policy.CompiledPolicyFile, read(policy.CompiledPolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	sandbox := t.TempDir()
	cp = cp.RebaseWithin("/workspace", sandbox)
	ann, err := policy.ParseAnnotations(policy.AnnotationsFile, read(policy.AnnotationsFile))
	if err != nil {
		t.Fatal(err)
	}
	lists, err := policy.ParseDynamicLists(policy.DynamicListsFile, read(policy.DynamicListsFile))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(cp, ann, lists, policy.Settings{Sandbox: sandbox, ConfinedServers: policy.BuiltinConfinedServers()}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	return eng
}
