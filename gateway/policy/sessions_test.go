package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sessTree is a deployment with a static sandbox and two session
// sandboxes, A and B, below a session root.
type sessTree struct {
	tree
	root string // the session sandbox root
	a, b string // the two session sandboxes
}

func newSessTree(t testing.TB) sessTree {
	t.Helper()
	st := sessTree{tree: newTree(t)}
	st.root = filepath.Join(st.tree.root, "sessions")
	st.a, st.b = filepath.Join(st.root, "ses_a1"), filepath.Join(st.root, "ses_b2")
	for _, dir := range []string{st.a, st.b} {
		for name, content := range map[string]string{"own.txt": "own", "keep/k.txt": "k", "secret/s.txt": "s"} {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content+dir), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(st.sandbox, "static.txt"), []byte("static"), 0o644); err != nil {
		t.Fatal(err)
	}
	return st
}

// sessEngine builds an engine whose rules are careless on purpose: writes
// anywhere under the test tree's root (which holds both sessions) are
// allowed, reads outside the sandbox escalate. Only the structural checks
// of per-session sandboxes keep the sessions apart.
func (st sessTree) engine(t testing.TB, confined []string) *Engine {
	t.Helper()
	e, err := New(reachRules(st.sandbox, st.tree.root), nil, nil, Settings{Sandbox: st.sandbox, Home: st.home,
		ConfinedServers: confined, Annotations: reachTools, SessionSandboxRoot: st.root,
		ProtectedPaths: []string{filepath.Join(st.sandbox, "secret")}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func readReq(p string) Request {
	return Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": p}}
}

func writeReq(p string) Request {
	return Request{Server: "filesystem", Tool: "write_file", Args: map[string]any{"path": p}}
}

// TestSessionSandboxesIsolated runs two sessions at once, each trying to
// name the other's files in every spelling: absolute, climbing with ..,
// through the agent's own view of its workspace, through a symlink it
// created in its own sandbox (absolute, relative, to a directory), a hard
// link, case and Unicode variants. Each must be denied, for reads and for
// writes, with and without confined servers, while the session's own
// files stay usable by the name the agent uses (/<static sandbox>/x).
func TestSessionSandboxesIsolated(t *testing.T) {
	st := newSessTree(t)
	type spelling struct {
		name string
		path func(own, other string) string
	}
	ws := st.sandbox // what the agent calls its workspace (/workspace)
	otherID := func(other string) string { return filepath.Base(other) }
	spellings := []spelling{
		{"absolute", func(own, other string) string { return filepath.Join(other, "own.txt") }},
		{"dot-dot from own", func(own, other string) string { return own + "/../" + otherID(other) + "/own.txt" }},
		{"dot-dot from the agent's view", func(own, other string) string { return ws + "/../sessions/" + otherID(other) + "/own.txt" }},
		{"dot-dot from the workspace name", func(own, other string) string { return ws + "/../" + otherID(other) + "/own.txt" }},
		{"relative dot-dot", func(own, other string) string { return "../" + otherID(other) + "/own.txt" }},
		{"absolute symlink in own", func(own, other string) string { return ws + "/link-abs" }},
		{"relative symlink in own", func(own, other string) string { return ws + "/link-rel" }},
		{"symlinked directory in own", func(own, other string) string { return ws + "/link-dir/own.txt" }},
		{"symlink to the agent's view of other", func(own, other string) string { return ws + "/link-static" }},
		{"hard link in own", func(own, other string) string { return ws + "/hard.txt" }},
		{"case variant of the id", func(own, other string) string {
			return filepath.Join(st.root, strings.ToUpper(otherID(other)), "own.txt")
		}},
		{"case variant of the root", func(own, other string) string {
			return filepath.Join(filepath.Dir(st.root), "SESSIONS", otherID(other), "own.txt")
		}},
		{"fullwidth letters in the id", func(own, other string) string {
			return filepath.Join(st.root, "ｓｅｓ_"+otherID(other)[4:], "own.txt")
		}},
		{"the session root", func(own, other string) string { return st.root }},
	}
	// Each session plants its links into the other.
	for _, p := range [][2]string{{st.a, st.b}, {st.b, st.a}} {
		own, other := p[0], p[1]
		for name, target := range map[string]string{
			"link-abs":    filepath.Join(other, "own.txt"),
			"link-rel":    "../" + otherID(other) + "/own.txt",
			"link-dir":    other,
			"link-static": filepath.Join(ws, "static.txt"),
		} {
			if err := os.Symlink(target, filepath.Join(own, name)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Link(filepath.Join(other, "keep", "k.txt"), filepath.Join(own, "hard.txt")); err != nil {
			t.Fatal(err)
		}
	}
	for _, confined := range [][]string{nil, BuiltinConfinedServers()} {
		e := st.engine(t, confined)
		var wg sync.WaitGroup
		for _, p := range [][2]string{{st.a, st.b}, {st.b, st.a}} {
			own, other := p[0], p[1]
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for _, sp := range spellings {
					path := sp.path(own, other)
					for _, req := range []Request{readReq(path), writeReq(path), fsMove(filepath.Join(ws, "own.txt"), path)} {
						req.Sandbox = own
						if d := e.Evaluate(ctx, req).Decision; d.Status != Deny {
							t.Errorf("confined=%v session %s, %s %s (%s): %s by %q (%s), want deny",
								confined != nil, filepath.Base(own), req.Tool, sp.name, path, d.Status, d.Rule, d.Detail)
						}
					}
				}
				for _, path := range []string{ws + "/own.txt", "own.txt", filepath.Join(own, "own.txt"), ws + "/new/file.txt"} {
					for _, req := range []Request{readReq(path), writeReq(path)} {
						req.Sandbox = own
						ev := e.Evaluate(ctx, req)
						if ev.Decision.Status != Allow || ev.Decision.Rule != RuleSandboxAllow {
							t.Errorf("session %s, own %s %s: %s by %q (%s), want allow", filepath.Base(own), req.Tool, path, ev.Decision.Status, ev.Decision.Rule, ev.Decision.Detail)
							continue
						}
						if got, _ := ev.Transport["path"].(string); !within(got, own) {
							t.Errorf("session %s, own %s %s: transport path %q is not in the session's sandbox", filepath.Base(own), req.Tool, path, got)
						}
					}
				}
			}()
		}
		wg.Wait()
	}
}

// TestSessionSandboxStaticUnchanged: the static agent token (no
// Request.Sandbox) keeps the configured sandbox, and cannot name any
// session's files.
func TestSessionSandboxStaticUnchanged(t *testing.T) {
	st := newSessTree(t)
	e := st.engine(t, BuiltinConfinedServers())
	ctx := context.Background()
	if d := e.Evaluate(ctx, readReq(st.sandbox+"/static.txt")).Decision; d.Status != Allow || d.Rule != RuleSandboxAllow {
		t.Fatalf("static read: %s by %q", d.Status, d.Rule)
	}
	for _, p := range []string{filepath.Join(st.a, "own.txt"), st.sandbox + "/../sessions/ses_b2/own.txt", filepath.Join(st.tree.root, "SESSIONS", "ses_a1", "own.txt")} {
		for _, req := range []Request{readReq(p), writeReq(p)} {
			if d := e.Evaluate(ctx, req).Decision; d.Status != Deny {
				t.Errorf("static %s %s: %s by %q, want deny", req.Tool, p, d.Status, d.Rule)
			}
		}
	}
}

// TestSessionSandboxRebases: a session's view rebases the compiled rules
// and the protected paths that lie in the configured sandbox.
func TestSessionSandboxRebases(t *testing.T) {
	st := newSessTree(t)
	e := st.engine(t, BuiltinConfinedServers())
	v, err := e.ForSandbox(st.a)
	if err != nil {
		t.Fatal(err)
	}
	if v.Sandbox() != st.a || v.Version() != e.Version() || v.Rebase().To != st.a {
		t.Fatalf("view: sandbox %q version %q rebase %+v", v.Sandbox(), v.Version(), v.Rebase())
	}
	ctx := context.Background()
	cases := []struct {
		name string
		req  Request
		want Status
		rule string
	}{
		{"delete in own sandbox escalates (rule rebased)", fsMove(st.sandbox+"/own.txt", st.sandbox+"/moved.txt"), Escalate, "escalate-delete-in-sandbox"},
		{"protected path rebased", readReq(st.sandbox + "/secret/s.txt"), Deny, RuleProtectedPath},
	}
	for _, c := range cases {
		c.req.Sandbox = st.a
		if d := e.Evaluate(ctx, c.req).Decision; d.Status != c.want || d.Rule != c.rule {
			t.Errorf("%s: %s by %q (%s), want %s by %q", c.name, d.Status, d.Rule, d.Detail, c.want, c.rule)
		}
	}
}

// TestSessionSandboxRefused: a Request.Sandbox that is not a directory
// strictly below the session root is denied, never judged against
// something else.
func TestSessionSandboxRefused(t *testing.T) {
	st := newSessTree(t)
	if err := os.Symlink(st.b, filepath.Join(st.root, "ses_link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.root, "ses_file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := st.engine(t, BuiltinConfinedServers())
	for _, sb := range []string{st.root, st.root + "/", st.root + "/ses_a1/../ses_b2", "ses_a1", st.sandbox, st.tree.outside,
		filepath.Join(st.root, "missing"), filepath.Join(st.root, "ses_link"), filepath.Join(st.root, "ses_file"), "/"} {
		req := readReq(st.sandbox + "/own.txt")
		req.Sandbox = sb
		if d := e.Evaluate(context.Background(), req).Decision; d.Status != Deny || d.Rule != RuleSessionSandbox {
			t.Errorf("sandbox %q: %s by %q, want deny by %q", sb, d.Status, d.Rule, RuleSessionSandbox)
		}
	}
	noRoot, err := New(reachRules(st.sandbox, st.sandbox), nil, nil, Settings{Sandbox: st.sandbox, Annotations: reachTools})
	if err != nil {
		t.Fatal(err)
	}
	req := readReq(st.sandbox + "/own.txt")
	req.Sandbox = st.a
	if d := noRoot.Evaluate(context.Background(), req).Decision; d.Status != Deny || d.Rule != RuleSessionSandbox {
		t.Errorf("no session root: %s by %q, want deny", d.Status, d.Rule)
	}
}

// TestSessionSandboxRootSettings: the root must be absolute, not /, and
// must not overlap the sandbox; errors name the field.
func TestSessionSandboxRootSettings(t *testing.T) {
	st := newSessTree(t)
	for _, c := range []struct {
		name    string
		sandbox string
		root    string
	}{
		{"relative", st.sandbox, "sessions"},
		{"root directory", st.sandbox, "/"},
		{"inside the sandbox", st.sandbox, filepath.Join(st.sandbox, "sessions")},
		{"contains the sandbox", st.sandbox, st.tree.root},
		{"the sandbox", st.sandbox, st.sandbox},
		{"no sandbox", "", st.root},
	} {
		_, err := New(&CompiledPolicy{}, nil, nil, Settings{Sandbox: c.sandbox, SessionSandboxRoot: c.root})
		if err == nil || !strings.Contains(err.Error(), "session_sandbox_root") {
			t.Errorf("%s: err = %v, want one naming session_sandbox_root", c.name, err)
		}
	}
}

// BenchmarkEvaluateSessionSandbox: the overhead of judging a call in a
// session's sandbox against the static one (the same read, an existing
// file; compare with BenchmarkEvaluateStaticSandbox).
func BenchmarkEvaluateSessionSandbox(b *testing.B) {
	benchSession(b, true)
}

// BenchmarkEvaluateStaticSandbox is BenchmarkEvaluateSessionSandbox's
// baseline: the same engine and call without Request.Sandbox.
func BenchmarkEvaluateStaticSandbox(b *testing.B) {
	benchSession(b, false)
}

// BenchmarkEvaluateStaticSandboxRelative is the static baseline with the
// path named relatively ("own.txt"), so that, as in a session's call, the
// server is handed a rewritten path (a new transport map).
func BenchmarkEvaluateStaticSandboxRelative(b *testing.B) {
	benchSessionPath(b, false, "own.txt")
}

func benchSession(b *testing.B, session bool) {
	benchSessionPath(b, session, "")
}

func benchSessionPath(b *testing.B, session bool, path string) {
	st := newSessTree(b)
	e := st.engine(b, BuiltinConfinedServers())
	if err := os.WriteFile(filepath.Join(st.sandbox, "own.txt"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	if path == "" {
		path = st.sandbox + "/own.txt"
	}
	req := readReq(path)
	if session {
		req.Sandbox = st.a
	}
	ctx := context.Background()
	if d := e.Evaluate(ctx, req).Decision; d.Status != Allow {
		b.Fatalf("decision %s by %q (%s)", d.Status, d.Rule, d.Detail)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Evaluate(ctx, req)
	}
}

// FuzzSessionSandbox: whatever path a session names, an allowed read or
// write in its view hands the server a path inside its own sandbox, never
// the other session's or the static sandbox.
func FuzzSessionSandbox(f *testing.F) {
	st := newSessTree(f)
	for _, s := range []string{"own.txt", "../ses_b2/own.txt", st.sandbox + "/own.txt", st.b + "/own.txt", st.sandbox + "/../sessions/ses_b2",
		"/SESSIONS/x", st.root + "/ＳＥＳ_b2/own.txt", "~/x", st.sandbox + "/./keep/../own.txt", "link-dir/own.txt"} {
		f.Add(s, false)
	}
	if err := os.Symlink(st.b, filepath.Join(st.a, "link-dir")); err != nil {
		f.Fatal(err)
	}
	e := st.engine(f, BuiltinConfinedServers())
	f.Fuzz(func(t *testing.T, raw string, write bool) {
		req := readReq(raw)
		if write {
			req = writeReq(raw)
		}
		req.Sandbox = st.a
		ev := e.Evaluate(context.Background(), req)
		if ev.Decision.Status != Allow {
			return
		}
		got, _ := ev.Transport["path"].(string)
		if !within(got, st.a) {
			t.Fatalf("%s %q allowed with transport path %q outside %s (%s)", req.Tool, raw, got, st.a, ev.Decision.Rule)
		}
	})
}

// TestSessionSandboxShadow: the shadow policy judges a session's call in
// the same session sandbox (its view), and a view carries no stale shadow.
func TestSessionSandboxShadow(t *testing.T) {
	st := newSessTree(t)
	e := st.engine(t, BuiltinConfinedServers()).WithShadow(st.engine(t, BuiltinConfinedServers()))
	for _, c := range []struct {
		path string
		want Status
	}{{st.sandbox + "/own.txt", Allow}, {filepath.Join(st.b, "own.txt"), Deny}} {
		req := readReq(c.path)
		req.Sandbox = st.a
		ev := e.Evaluate(context.Background(), req)
		if ev.Decision.Status != c.want || ev.Shadow == nil || ev.Shadow.Status != c.want {
			t.Errorf("%s: decision %s, shadow %+v, want %s from both", c.path, ev.Decision.Status, ev.Shadow, c.want)
		}
	}
}
