package git

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ironcurtain.dev/gateway/internal/gitmirror"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// httpsEnv is a sandbox with a repository "app" whose origin is a bare
// repository served over HTTPS with token authentication, and a server
// configured with that token. Every git process the server starts goes
// through a wrapper that records its argv and environment and turns on
// GIT_TRACE (which records the argv of every sub-process git runs).
type httpsEnv struct {
	*genv
	h       *gitHTTPServer
	token   string
	repo    string
	bare    string
	gitLog  string // wrapper log: argv and environment of each git run
	trace   string // GIT_TRACE output
	logBuf  *syncBuffer
	plainGi string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newToken(t testing.TB) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "ghp_TEST" + hex.EncodeToString(b[:])
}

func newHTTPSEnv(t *testing.T, mod func(*Config)) *httpsEnv {
	t.Helper()
	e := &httpsEnv{token: newToken(t), logBuf: &syncBuffer{}}
	secrets := filepath.Join(t.TempDir(), "secrets")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(secrets, "github_token")
	writeFile(t, tokenFile, e.token+"\n")
	served := t.TempDir()
	e.h = newGitHTTPServer(t, served, e.token)
	logs := t.TempDir()
	e.gitLog, e.trace = filepath.Join(logs, "git.log"), filepath.Join(logs, "trace.log")
	wrapper := filepath.Join(logs, "git-wrapper")
	writeFile(t, wrapper, "#!/bin/sh\n{ echo ARGV; for a in \"$@\"; do printf '%s\\n' \"$a\"; done; echo ENV; env; } >> '"+e.gitLog+"'\n"+
		"GIT_TRACE='"+e.trace+"' exec git \"$@\"\n")
	if err := os.Chmod(wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	e.genv = newGenv(t, func(c *Config) {
		c.Credentials = Credentials{TokenFile: tokenFile, TokenHosts: []string{e.h.host}}
		c.UnsafeTestCAFile = e.h.caFile
		c.Git = wrapper
		c.Logger = slog.New(slog.NewJSONHandler(e.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if mod != nil {
			mod(c)
		}
	})
	e.repo = e.genv.repo("app")
	e.bare = e.h.serveBare(t, "app.git", e.repo)
	rawGit(t, e.repo, "remote", "add", "origin", e.h.url("app.git"))
	rawGit(t, e.repo, "fetch", "-q", filepath.Join(served, "app.git"), "main:refs/remotes/origin/main")
	return e
}

// assertTokenNowhere scans everything the gateway produced or exposed: the
// argv and environment of every git process, git's own trace of its
// sub-processes, the server's logs, the given results and the files in the
// mirror directory (the credential helper holds the token file's path, not
// the token).
func (e *httpsEnv) assertTokenNowhere(t *testing.T, results ...string) {
	t.Helper()
	check := func(what, s string) {
		t.Helper()
		if strings.Contains(s, e.token) {
			t.Fatalf("the token appears in %s", what)
		}
	}
	for _, f := range []string{e.gitLog, e.trace} {
		b, _ := os.ReadFile(f)
		check(f, string(b))
	}
	check("the server log", e.logBuf.String())
	for i, r := range results {
		check("result "+string(rune('0'+i)), r)
	}
	_ = filepath.Walk(e.mirror, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() < 1<<20 {
			b, _ := os.ReadFile(p)
			check(p, string(b))
		}
		return nil
	})
	// The workspace never receives credential settings.
	cfg, _ := os.ReadFile(filepath.Join(e.repo, ".git", "config"))
	if strings.Contains(string(cfg), "credential") || strings.Contains(string(cfg), e.token) {
		t.Fatalf("credential settings leaked into the workspace config:\n%s", cfg)
	}
}

// watchProcesses scans every process's command line and environment in
// /proc until stopped (a process listing taken continuously while the
// network operations run) and reports whether the token appeared.
func watchProcesses(t *testing.T, token string) (stop func() (seen bool, scans int)) {
	t.Helper()
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Log("no /proc: process scan skipped")
		return func() (bool, int) { return false, 0 }
	}
	done := make(chan struct{})
	var mu sync.Mutex
	seen, scans := false, 0
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			procs, _ := filepath.Glob("/proc/[0-9]*")
			for _, p := range procs {
				for _, f := range []string{"cmdline", "environ"} {
					if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && bytes.Contains(b, []byte(token)) {
						mu.Lock()
						seen = true
						mu.Unlock()
					}
				}
			}
			mu.Lock()
			scans++
			mu.Unlock()
		}
	}()
	return func() (bool, int) {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		return seen, scans
	}
}

// approvedPush computes the plan the policy engine would hand the hub for
// this push (the engine runs the same PushChecker).
func (e *httpsEnv) approvedPush(t *testing.T, args map[string]any) servers.CallInfo {
	t.Helper()
	in, err := policy.ParsePushArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := e.srv.push.Check(context.Background(), e.repo, in)
	if err != nil {
		t.Fatalf("policy would refuse: %v", err)
	}
	return servers.CallInfo{Push: &plan}
}

func TestPushOverHTTPS(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	payload := e.payload()
	// Hooks the push must never run.
	for _, hook := range []string{"pre-push", "post-commit", "reference-transaction", "push-to-checkout"} {
		writeFile(t, filepath.Join(e.repo, ".git", "hooks", hook), "#!/bin/sh\n'"+payload+"'\n")
		if err := os.Chmod(filepath.Join(e.repo, ".git", "hooks", hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rawGit(t, e.repo, "switch", "-q", "-c", "feature")
	writeFile(t, filepath.Join(e.repo, "f.txt"), "feature\n")
	rawGit(t, e.repo, "add", "f.txt")
	rawGit(t, e.repo, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "feature")
	args := map[string]any{"path": e.repo, "branch": "feature", "set_upstream": true}
	stopWatch := watchProcesses(t, e.token)
	out := mustOK(t, e.callInfo(e.approvedPush(t, args), "push", args))
	if seen, scans := stopWatch(); seen {
		t.Fatal("the token appeared in a process's command line or environment")
	} else {
		t.Logf("%d process listings taken during the push", scans)
	}
	if !strings.Contains(out, "refs/heads/feature:refs/heads/feature") {
		t.Fatalf("report: %s", out)
	}
	if got, want := rawGit(t, e.bare, "rev-parse", "refs/heads/feature"), rawGit(t, e.repo, "rev-parse", "feature"); got != want {
		t.Fatalf("remote feature = %s, want %s", got, want)
	}
	if got := rawGit(t, e.repo, "rev-parse", "refs/remotes/origin/feature"); got != rawGit(t, e.repo, "rev-parse", "feature") {
		t.Fatal("remote-tracking ref not updated")
	}
	if up := rawGit(t, e.repo, "rev-parse", "--abbrev-ref", "feature@{upstream}"); up != "origin/feature" {
		t.Fatalf("upstream %q", up)
	}
	if !e.h.sawToken() {
		t.Fatal("the server never received the token: credentials did not reach git")
	}
	e.assertNoMarker()
	e.assertTokenNowhere(t, out)

	// A second push of new work reuses the mirror.
	writeFile(t, filepath.Join(e.repo, "f.txt"), "more\n")
	rawGit(t, e.repo, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "more")
	args = map[string]any{"path": e.repo}
	out = mustOK(t, e.callInfo(e.approvedPush(t, args), "push", args))
	if got, want := rawGit(t, e.bare, "rev-parse", "refs/heads/feature"), rawGit(t, e.repo, "rev-parse", "feature"); got != want {
		t.Fatal("second push did not land")
	}
	e.assertTokenNowhere(t, out)
	e.assertNoMarker()
}

func TestPushTagsAndWildcards(t *testing.T) {
	e := newHTTPSEnv(t, func(c *Config) { c.UnsafeSkipApprovalBinding = true })
	rawGit(t, e.repo, "branch", "feat-a")
	rawGit(t, e.repo, "branch", "feat-b")
	rawGit(t, e.repo, "tag", "-a", "-m", "one", "v1")
	mustOK(t, e.call("push", map[string]any{"path": e.repo, "refspecs": []any{"refs/heads/feat-*:refs/heads/feat-*"}, "tags": true}))
	for _, ref := range []string{"refs/heads/feat-a", "refs/heads/feat-b", "refs/tags/v1"} {
		rawGit(t, e.bare, "rev-parse", "--verify", ref)
	}
	if typ := rawGit(t, e.bare, "cat-file", "-t", "v1"); typ != "tag" {
		t.Fatalf("annotated tag arrived as %s", typ)
	}
	// A wildcard that would reach a protected branch is refused after
	// expansion.
	rawGit(t, e.repo, "branch", "x-main")
	mustFail(t, e.call("push", map[string]any{"path": e.repo, "refspecs": []any{"refs/heads/x-*:refs/heads/*"}}), "protected")
}

// TestPushRefusals: force in every spelling, deletions, protected branches
// in every spelling, option injection and non-network remotes are refused
// by the server itself, before anything is sent.
func TestPushRefusals(t *testing.T) {
	e := newHTTPSEnv(t, func(c *Config) { c.UnsafeSkipApprovalBinding = true })
	rawGit(t, e.repo, "branch", "feature")
	payload := e.payload()
	before := rawGit(t, e.bare, "for-each-ref")
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{name: "protected main", args: map[string]any{"branch": "main"}, want: "protected"},
		{name: "protected via refspec", args: map[string]any{"branch": "feature:main"}, want: "protected"},
		{name: "protected full ref", args: map[string]any{"refspecs": []any{"feature:refs/heads/main"}}, want: "protected"},
		{name: "protected case folded", args: map[string]any{"refspecs": []any{"feature:refs/heads/MAIN"}}, want: "protected"},
		{name: "protected via remote_branch", args: map[string]any{"branch": "feature", "remote_branch": "master"}, want: "protected"},
		{name: "protected HEAD", args: map[string]any{"branch": "HEAD:main"}, want: "protected"},
		{name: "force flag", args: map[string]any{"branch": "feature", "force": true}, want: "not allowed"},
		{name: "force with lease", args: map[string]any{"branch": "feature", "force_with_lease": true}, want: "not allowed"},
		{name: "plus refspec", args: map[string]any{"refspecs": []any{"+feature:feature"}}, want: "force push"},
		{name: "plus branch", args: map[string]any{"branch": "+feature"}, want: "force push"},
		{name: "delete refspec", args: map[string]any{"refspecs": []any{":feature"}}, want: "deleting"},
		{name: "delete via branch", args: map[string]any{"branch": ":feature"}, want: "deleting"},
		{name: "matching refspec", args: map[string]any{"refspecs": []any{":"}}, want: "every branch"},
		{name: "mirror argument", args: map[string]any{"mirror": true}, want: "unknown argument"},
		{name: "receive-pack injection", args: map[string]any{"remote": "--receive-pack=" + payload, "branch": "feature"}, want: "'-'"},
		{name: "exec injection in branch", args: map[string]any{"branch": "--exec=" + payload}, want: "'-'"},
		{name: "option in refspec", args: map[string]any{"refspecs": []any{"--force"}}, want: "'-'"},
		{name: "ext transport", args: map[string]any{"remote": "ext::sh -c " + payload, "branch": "feature"}, want: "refused"},
		{name: "fd transport", args: map[string]any{"remote": "fd::3", "branch": "feature"}, want: "refused"},
		{name: "local path remote", args: map[string]any{"remote": e.bare, "branch": "feature"}, want: "refused"},
		{name: "file url remote", args: map[string]any{"remote": "file://" + e.bare, "branch": "feature"}, want: "refused"},
		{name: "http remote", args: map[string]any{"remote": "http://github.com/acme/app.git", "branch": "feature"}, want: "refused"},
		{name: "unknown remote name", args: map[string]any{"remote": "nosuch", "branch": "feature"}, want: "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.args["path"] = e.repo
			mustFail(t, e.call("push", tc.args), tc.want)
			e.assertNoMarker()
			if after := rawGit(t, e.bare, "for-each-ref"); after != before {
				t.Fatalf("the remote changed:\n%s", after)
			}
		})
	}
}

// TestPushBoundToPolicyPlan: the push executes only the plan the policy
// judged. Re-pointing the remote (url, pushurl or pushInsteadOf) after the
// decision, or calling without a decision, is refused and nothing is sent.
func TestPushBoundToPolicyPlan(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	evil := e.h.serveBare(t, "evil.git", "")
	rawGit(t, e.repo, "branch", "feature")
	args := map[string]any{"path": e.repo, "branch": "feature"}

	mustFail(t, e.call("push", args), "no policy-checked push plan")

	approved := e.approvedPush(t, args)
	for _, swap := range []struct {
		name string
		do   func()
		undo func()
	}{
		{name: "url", do: func() { rawGit(t, e.repo, "remote", "set-url", "origin", e.h.url("evil.git")) },
			undo: func() { rawGit(t, e.repo, "remote", "set-url", "origin", e.h.url("app.git")) }},
		{name: "pushurl", do: func() { rawGit(t, e.repo, "config", "remote.origin.pushurl", e.h.url("evil.git")) },
			undo: func() { rawGit(t, e.repo, "config", "--unset", "remote.origin.pushurl") }},
		{name: "pushInsteadOf", do: func() { rawGit(t, e.repo, "config", "url."+e.h.url("evil.git")+".pushInsteadOf", e.h.url("app.git")) },
			undo: func() { rawGit(t, e.repo, "config", "--remove-section", "url."+e.h.url("evil.git")) }},
		{name: "push refspec", do: func() { rawGit(t, e.repo, "config", "remote.origin.push", "refs/heads/feature:refs/heads/other") },
			undo: func() { rawGit(t, e.repo, "config", "--unset", "remote.origin.push") }},
	} {
		t.Run(swap.name, func(t *testing.T) {
			swap.do()
			defer swap.undo()
			res := e.callInfo(approved, "push", map[string]any{"path": e.repo})
			if !res.IsError {
				t.Fatalf("push after re-pointing the remote succeeded: %s", text(res))
			}
			if refs := rawGit(t, evil, "for-each-ref"); refs != "" {
				t.Fatalf("objects reached the re-pointed remote: %s", refs)
			}
		})
	}
	mustOK(t, e.callInfo(approved, "push", args))

	// The plan may also travel in the context through the policy
	// package's own carrier.
	rawGit(t, e.repo, "commit", "-q", "--allow-empty", "-m", "again")
	rawGit(t, e.repo, "branch", "-f", "feature", "HEAD")
	plan := e.approvedPush(t, args).Push
	ctx := policy.WithPushPlan(context.Background(), plan)
	res, err := e.srv.Call(ctx, "push", args)
	if err != nil || res.IsError {
		t.Fatalf("push with policy.WithPushPlan: %v %s", err, text(res))
	}
}

func TestFetchPullCloneOverHTTPS(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	url := e.h.url("app.git")
	// New work arrives on the remote from someone else.
	other := filepath.Join(e.base, "other")
	rawGit(t, e.base, "clone", "-q", e.bare, other)
	writeFile(t, filepath.Join(other, "upstream.txt"), "up\n")
	rawGit(t, other, "add", "upstream.txt")
	rawGit(t, other, "commit", "-q", "-m", "upstream work")
	rawGit(t, other, "push", "-q", "origin", "main")

	approve := func(arg string) servers.CallInfo { return servers.CallInfo{PolicyArgs: map[string]any{arg: url}} }
	out := mustOK(t, e.callInfo(approve("remote"), "fetch", map[string]any{"path": e.repo}))
	if got, want := rawGit(t, e.repo, "rev-parse", "refs/remotes/origin/main"), rawGit(t, other, "rev-parse", "HEAD"); got != want {
		t.Fatalf("fetch: origin/main = %s, want %s (%s)", got, want, out)
	}
	if strings.Contains(out, e.mirror) {
		t.Fatalf("the mirror path leaked: %s", out)
	}
	out2 := mustOK(t, e.callInfo(approve("remote"), "pull", map[string]any{"path": e.repo, "ff_only": true}))
	if _, err := os.Stat(filepath.Join(e.repo, "upstream.txt")); err != nil {
		t.Fatalf("pull did not merge: %s", out2)
	}
	clone := filepath.Join(e.sandbox, "cloned")
	out3 := mustOK(t, e.callInfo(approve("url"), "clone", map[string]any{"url": url, "path": clone}))
	if _, err := os.Stat(filepath.Join(clone, "upstream.txt")); err != nil {
		t.Fatalf("clone has no files: %s", out3)
	}
	if b := rawGit(t, clone, "rev-parse", "--abbrev-ref", "main@{upstream}"); b != "origin/main" {
		t.Fatalf("clone upstream %q", b)
	}
	// The clone's own config was written by the gateway: a remote, a branch.
	cfg := rawGit(t, clone, "config", "--list", "--local")
	if strings.Contains(cfg, "credential") || strings.Contains(cfg, "sslcainfo") {
		t.Fatalf("gateway settings leaked into the clone:\n%s", cfg)
	}
	e.assertTokenNowhere(t, out, out2, out3)

	// Decisions bind: a URL the policy did not judge is refused.
	wrong := servers.CallInfo{PolicyArgs: map[string]any{"remote": e.h.url("other.git")}}
	mustFail(t, e.callInfo(wrong, "fetch", map[string]any{"path": e.repo}), "not what the policy approved")
	mustFail(t, e.call("fetch", map[string]any{"path": e.repo}), "no policy decision")
	mustFail(t, e.callInfo(servers.CallInfo{PolicyArgs: map[string]any{"url": e.h.url("x.git")}}, "clone",
		map[string]any{"url": url, "path": filepath.Join(e.sandbox, "c2")}), "not what the policy approved")
	if _, err := os.Stat(filepath.Join(e.sandbox, "c2")); err == nil {
		t.Fatal("a refused clone created its directory")
	}
}

// TestTokenOnlyForListedHosts: the helper answers for https and the listed
// hosts only. A second server (another host:port) asking for credentials
// gets nothing, and never sees the token.
func TestTokenOnlyForListedHosts(t *testing.T) {
	e := newHTTPSEnv(t, func(c *Config) { c.UnsafeSkipApprovalBinding = true })
	helper := filepath.Join(e.mirror, gitmirror.CredentialHelperName)
	ask := func(input string) string {
		cmd := exec.Command(helper, "get")
		cmd.Stdin = strings.NewReader(input)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper: %v", err)
		}
		return string(out)
	}
	if out := ask("protocol=https\nhost=" + e.h.host + "\n\n"); !strings.Contains(out, "password="+e.token) {
		t.Fatalf("helper did not answer for the listed host: %q", out)
	}
	for _, in := range []string{
		"protocol=https\nhost=evil.example\n\n",
		"protocol=http\nhost=" + e.h.host + "\n\n",
		"protocol=https\nhost=" + e.h.host + ".evil.example\n\n",
		"protocol=https\nhost=*\n\n",
		"host=" + e.h.host + "\nprotocol=ssh\n\n",
	} {
		if out := ask(in); out != "" {
			t.Fatalf("helper answered %q for %q", out, in)
		}
	}
	if out, _ := exec.Command(helper, "store").Output(); len(out) != 0 {
		t.Fatal("helper answered a store request")
	}

	other := newGitHTTPServer(t, t.TempDir(), "a-different-token")
	other.serveBare(t, "x.git", "")
	res := e.call("clone", map[string]any{"url": other.url("x.git"), "path": filepath.Join(e.sandbox, "x")})
	if !res.IsError {
		t.Fatal("clone from an unlisted host authenticated")
	}
	e.assertTokenNowhere(t, text(res))
	if other.sawToken() {
		t.Fatal("the token was sent to an unlisted host")
	}
	other.mu.Lock()
	for _, a := range other.auths {
		if a != "" {
			t.Fatalf("credentials were sent to an unlisted host: %q", a)
		}
	}
	other.mu.Unlock()
}

// TestSSHUsesOnlyTheGatewaysSettings: ssh runs with the gateway's key,
// known_hosts and strict host key checking, and nothing from the
// repository. A fake ssh records its arguments.
func TestSSHUsesOnlyTheGatewaysSettings(t *testing.T) {
	bin := t.TempDir()
	sshLog := filepath.Join(bin, "ssh.log")
	writeFile(t, filepath.Join(bin, "ssh"), "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '"+sshLog+"'\nexit 255\n")
	if err := os.Chmod(filepath.Join(bin, "ssh"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	secrets := t.TempDir()
	key, known := filepath.Join(secrets, "id_ed25519"), filepath.Join(secrets, "known_hosts")
	writeFile(t, key, "not a real key")
	writeFile(t, known, "")
	g := newGenv(t, func(c *Config) {
		c.Credentials = Credentials{SSHKeyFile: key, SSHKnownHostsFile: known}
		c.UnsafeSkipApprovalBinding = true
	})
	repo := g.repo("app")
	rawGit(t, repo, "remote", "add", "origin", "ssh://git@github.com/acme/app.git")
	rawGit(t, repo, "branch", "feature")
	res := g.call("push", map[string]any{"path": repo, "branch": "feature"})
	if !res.IsError {
		t.Fatal("push through a failing ssh succeeded")
	}
	b, err := os.ReadFile(sshLog)
	if err != nil {
		t.Fatalf("ssh never ran: %v (%s)", err, text(res))
	}
	args := string(b)
	for _, want := range []string{"StrictHostKeyChecking=yes", "UserKnownHostsFile=" + known, "IdentityFile=" + key,
		"IdentitiesOnly=yes", "ProxyCommand=none", "BatchMode=yes", "git@github.com"} {
		if !strings.Contains(args, want) {
			t.Fatalf("ssh arguments lack %q:\n%s", want, args)
		}
	}
	if strings.Contains(text(res), key) || strings.Contains(text(res), secrets) {
		t.Fatalf("the result names a gateway secret path: %s", text(res))
	}
}

// TestLocalRemotes: with UnsafeAllowLocalRemotes (tests only) a local bare
// repository serves as remote for clone, fetch and pull; without it every
// local path or file:// remote is refused.
func TestLocalRemotes(t *testing.T) {
	t.Run("allowed with the unsafe switch", func(t *testing.T) {
		g := newGenv(t, func(c *Config) { c.UnsafeAllowLocalRemotes = true; c.UnsafeSkipApprovalBinding = true })
		seed := g.repo("seed")
		bare := g.bare("remote.git", seed)
		clone := filepath.Join(g.sandbox, "clone")
		mustOK(t, g.call("clone", map[string]any{"url": bare, "path": clone}))
		if _, err := os.Stat(filepath.Join(clone, "README")); err != nil {
			t.Fatal("clone has no README")
		}
		writeFile(t, filepath.Join(seed, "new.txt"), "n")
		rawGit(t, seed, "add", "new.txt")
		rawGit(t, seed, "commit", "-q", "-m", "new")
		rawGit(t, seed, "push", "-q", bare, "main")
		mustOK(t, g.call("fetch", map[string]any{"path": clone}))
		if rawGit(t, clone, "rev-parse", "origin/main") != rawGit(t, seed, "rev-parse", "main") {
			t.Fatal("fetch did not update origin/main")
		}
		mustOK(t, g.call("pull", map[string]any{"path": clone}))
		if _, err := os.Stat(filepath.Join(clone, "new.txt")); err != nil {
			t.Fatal("pull did not merge")
		}
		mustOK(t, g.call("fetch", map[string]any{"path": clone, "remote": "file://" + bare, "branch": "main"}))
		// Pushes always go through the policy's checker, which knows only
		// network remotes.
		mustFail(t, g.call("push", map[string]any{"path": clone, "branch": "main:feature"}), "refused")
	})
	t.Run("refused by default", func(t *testing.T) {
		g := newGenv(t, func(c *Config) { c.UnsafeSkipApprovalBinding = true })
		seed := g.repo("seed")
		bare := g.bare("remote.git", seed)
		repo := g.repo("repo")
		rawGit(t, repo, "remote", "add", "origin", bare)
		for _, tc := range []struct {
			name string
			tool string
			args map[string]any
		}{
			{name: "clone path", tool: "clone", args: map[string]any{"url": bare, "path": filepath.Join(g.sandbox, "c1")}},
			{name: "clone file url", tool: "clone", args: map[string]any{"url": "file://" + bare, "path": filepath.Join(g.sandbox, "c2")}},
			{name: "clone relative", tool: "clone", args: map[string]any{"url": "../outside/remote.git", "path": filepath.Join(g.sandbox, "c3")}},
			{name: "remote add path", tool: "remote", args: map[string]any{"path": repo, "operation": "add", "name": "l", "url": bare}},
			{name: "remote add file", tool: "remote", args: map[string]any{"path": repo, "operation": "add", "name": "l", "url": "file://" + bare}},
			{name: "fetch configured local origin", tool: "fetch", args: map[string]any{"path": repo}},
			{name: "fetch local url", tool: "fetch", args: map[string]any{"path": repo, "remote": bare, "branch": "main"}},
			{name: "pull configured local origin", tool: "pull", args: map[string]any{"path": repo}},
			{name: "push configured local origin", tool: "push", args: map[string]any{"path": repo, "branch": "main:x"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := g.call(tc.tool, tc.args)
				if !res.IsError {
					t.Fatalf("local remote accepted: %s", text(res))
				}
				// The refusal may quote the agent's own remote value, never
				// a gateway path.
				if strings.Contains(text(res), g.mirror) {
					t.Fatalf("refusal names the gateway mirror: %s", text(res))
				}
			})
		}
		for _, d := range []string{"c1", "c2", "c3"} {
			if _, err := os.Stat(filepath.Join(g.sandbox, d)); err == nil {
				t.Fatalf("refused clone left %s behind", d)
			}
		}
	})
}

// TestTokenFromValue: a token given as a value (from the gateway's
// environment) is written to a private file in the mirror directory and
// served by the helper like a token file.
func TestTokenFromValue(t *testing.T) {
	tok := newToken(t)
	g := newGenv(t, func(c *Config) { c.Credentials = Credentials{Token: tok} })
	f := filepath.Join(g.mirror, gitmirror.TokenFileName)
	fi, err := os.Stat(f)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %v, %v", fi, err)
	}
	cmd := exec.Command(filepath.Join(g.mirror, gitmirror.CredentialHelperName), "get")
	cmd.Stdin = strings.NewReader("protocol=https\nhost=github.com\n\n")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "password="+tok) {
		t.Fatalf("helper: %q, %v", out, err)
	}
	if g.srv.mirrors.Credentials().Token != "" {
		t.Fatal("the server keeps the token value in its config")
	}
	if _, err := New(Config{Sandbox: g.sandbox, MirrorDir: g.mirror, Credentials: Credentials{Token: tok, TokenFile: f}}); err == nil {
		t.Fatal("both Token and TokenFile accepted")
	}
}
