package githttp

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/audit/audittest"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	gitsrv "ironcurtain.dev/gateway/internal/servers/git"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/testenv"
	"ironcurtain.dev/gateway/policies/base"
	"ironcurtain.dev/gateway/policy"
)

const (
	agentToken    = "agent-token-0123456789"
	upstreamToken = "upstream-secret-token-abcdef"
)

// needGit fails in CI and skips elsewhere when the git CLI or git
// http-backend is missing.
func needGit(t testing.TB) string {
	t.Helper()
	return testenv.Require(t, "git-http-backend")
}

// upstream is a smart-HTTP git server over TLS (git http-backend as CGI)
// that requires the gateway's token, standing in for github.com.
type upstream struct {
	srv    *httptest.Server
	root   string
	caFile string
	host   string
	mu     sync.Mutex
	auths  []string
	paths  []string // every request's path and query, in order
}

// requests returns the paths (with queries) the upstream was asked for.
func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.paths...)
}

func newUpstream(t testing.TB) *upstream {
	t.Helper()
	backend := needGit(t)
	u := &upstream{root: t.TempDir()}
	h := &cgi.Handler{
		Path: backend,
		Env: []string{"GIT_PROJECT_ROOT=" + u.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=tester",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent"},
		InheritEnv: []string{"PATH"},
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+upstreamToken))
	u.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.paths = append(u.paths, r.URL.RequestURI())
		u.mu.Unlock()
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if len(r.TransferEncoding) > 0 {
			// net/http/cgi refuses chunked bodies (git sends pushes over
			// http.postBuffer chunked); GitHub does not.
			// Spooled to a file, so the test's heap shows the door's.
			f, err := os.CreateTemp(u.root, "body-")
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer os.Remove(f.Name())
			defer f.Close()
			n, err := io.Copy(f, r.Body)
			if err == nil {
				_, err = f.Seek(0, io.SeekStart)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(f), n, nil
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	u.host = strings.TrimPrefix(u.srv.URL, "https://")
	u.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(u.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return u
}

// bare creates owner/name.git under the root with one commit on main.
func (u *upstream) bare(t testing.TB, owner, name string) string {
	t.Helper()
	dir := filepath.Join(u.root, owner, name+".git")
	run(t, "", "init", "-q", "--bare", "-b", "main", dir)
	run(t, dir, "config", "http.receivepack", "true")
	seed := t.TempDir()
	run(t, seed, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(seed, "README"), "hello\n")
	run(t, seed, "add", "README")
	run(t, seed, "commit", "-q", "-m", "initial")
	run(t, seed, "push", "-q", dir, "main:main")
	return dir
}

// memSink records audit events.
type memSink struct{ audittest.Sink }

func (s *memSink) last(t testing.TB) *audit.ToolCallDecision {
	t.Helper()
	ds := s.Decisions()
	if len(ds) == 0 {
		t.Fatal("no decision recorded")
	}
	return ds[len(ds)-1]
}

type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, tok string) (session.Session, error) {
	if tok == agentToken {
		return session.Session{ID: "s1", Name: "agent"}, nil
	}
	return session.Session{}, session.ErrUnknownToken
}

// fakeEscalator answers after started is signalled, with the result the
// test sends on answer (nil answer channel: approve at once).
type fakeEscalator struct {
	started chan escalation.Request
	answer  chan escalation.Result
}

func (f *fakeEscalator) Escalate(ctx context.Context, req escalation.Request) (escalation.Result, error) {
	if f.started != nil {
		f.started <- req
	}
	if f.answer == nil {
		return escalation.Result{ID: req.ID, Approved: true, Status: "approved", DecidedBy: "test"}, nil
	}
	select {
	case r := <-f.answer:
		r.ID = req.ID
		return r, nil
	case <-ctx.Done():
		return escalation.Result{}, ctx.Err()
	}
}

// env is a door in front of a fake github.com with one repository.
type env struct {
	up     *upstream
	bareD  string // the upstream repository
	door   *httptest.Server
	sink   *memSink
	esc    *fakeEscalator
	url    string // the client's remote URL (agent token as the password)
	home   string
	mirror string // the git server's MirrorDir
}

// mirrorDir is the door's mirror of the repository.
func (e *env) mirrorDir(t testing.TB) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(e.mirror, "door-*.git"))
	if len(m) != 1 {
		t.Fatalf("door mirrors: %v", m)
	}
	return m[0]
}

type envOptions struct {
	base  bool                  // the shipped base policy (policies/base)
	rules []policy.CompiledRule // default: allow everything
	cfg   Config
	esc   *fakeEscalator
	// secrets configures secret scanning (the zero value: default
	// detectors, escalate).
	secrets policy.SecretScan
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	up := newUpstream(t)
	e := &env{up: up, sink: &memSink{}, esc: o.esc, home: t.TempDir()}
	e.bareD = up.bare(t, "acme", "app")
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sandbox := filepath.Join(base, "sandbox")
	e.mirror = filepath.Join(base, "mirror")
	if err := os.Mkdir(sandbox, 0o755); err != nil {
		t.Fatal(err)
	}
	gs, err := gitsrv.New(gitsrv.Config{Sandbox: sandbox, MirrorDir: filepath.Join(base, "mirror"),
		Credentials:      gitsrv.Credentials{Token: upstreamToken, TokenHosts: []string{up.host}},
		UnsafeTestCAFile: up.caFile, Timeout: 30 * time.Second, NetworkTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var anns []policy.ToolAnnotation
	for _, tool := range gs.Tools() {
		anns = append(anns, tool.Annotation)
	}
	rules := o.rules
	if rules == nil {
		rules = []policy.CompiledRule{{Name: "allow-everything", Then: policy.Allow, Reason: "test"}}
	}
	var eng *policy.Engine
	if o.base {
		eng = baseEngine(t, sandbox)
	} else {
		eng, err = policy.New(&policy.CompiledPolicy{Rules: rules}, nil, nil, policy.Settings{Sandbox: sandbox, Annotations: anns,
			DomainAllowlists: map[string][]string{"git": {"github.com"}}, Secrets: o.secrets}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
		if err != nil {
			t.Fatal(err)
		}
	}
	var esc escalation.Escalator = escalation.Deny{}
	if o.esc != nil {
		esc = o.esc
	}
	hub, err := gate.New(gate.Config{CallTimeout: time.Minute, ProgressEvery: 50 * time.Millisecond},
		gate.Deps{Servers: []servers.Server{gs}, Policy: eng, Escalator: esc, Audit: e.sink})
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.cfg
	cfg.UnsafeUpstreams = map[string]string{"github.com": up.srv.URL}
	d, err := New(cfg, Deps{Gate: hub, Auth: tokenAuth{}, Mirrors: gs.Mirrors(), Allow: eng, Audit: e.sink, Secrets: eng,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(Prefix, d)
	e.door = httptest.NewServer(mux)
	t.Cleanup(e.door.Close)
	e.url = "http://agent:" + agentToken + "@" + strings.TrimPrefix(e.door.URL, "http://") + "/git/github.com/acme/app.git"
	return e
}

// git runs the client git in dir with a clean configuration and returns
// its combined output and error.
func (e *env) git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=Agent", "-c", "user.email=agent@example.invalid",
		"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *env) mustGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := e.git(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// clone clones the repository through the door into a new directory.
func (e *env) clone(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	e.mustGit(t, "", "clone", "-q", e.url, dir)
	return dir
}

// commit adds a commit on the current branch.
func (e *env) commit(t testing.TB, dir, file, content string) string {
	t.Helper()
	writeFile(t, filepath.Join(dir, file), content)
	e.mustGit(t, dir, "add", file)
	e.mustGit(t, dir, "commit", "-q", "-m", "change "+file)
	return strings.TrimSpace(e.mustGit(t, dir, "rev-parse", "HEAD"))
}

// upstreamRef is the upstream's value of ref ("" when absent).
func (e *env) upstreamRef(t testing.TB, ref string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", e.bareD, "rev-parse", "--verify", "--quiet", ref).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.invalid"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testLog sends the door's log to the test's.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func chmodX(p string) error { return os.Chmod(p, 0o755) }

// baseEngine loads the shipped base policy for sandbox, with github.com in
// the git allowlist.
func baseEngine(t testing.TB, sandbox string) *policy.Engine {
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
	cp = cp.RebaseWithin("/workspace", sandbox)
	ann, err := policy.ParseAnnotations(policy.AnnotationsFile, read(policy.AnnotationsFile))
	if err != nil {
		t.Fatal(err)
	}
	lists, err := policy.ParseDynamicLists(policy.DynamicListsFile, read(policy.DynamicListsFile))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(cp, ann, lists, policy.Settings{Sandbox: sandbox, ConfinedServers: policy.BuiltinConfinedServers(),
		DomainAllowlists: map[string][]string{"git": {"github.com"}}}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// egressOf returns the egress rows of a call.
func (s *memSink) egressOf(callID string) []*audit.EgressEvent {
	var out []*audit.EgressEvent
	for _, g := range s.Egress() {
		if g.ToolCallID == callID {
			out = append(out, g)
		}
	}
	return out
}
