// Package agente2e runs the agent against the real gateway in one process:
// scripted model → agent runner → code-mode sandbox → MCP over HTTP → the
// real MCP hub (policy engine with the shipped base policy, audit, an
// escalator standing in for the human) → the built-in filesystem and git
// servers on temp directories. It lives in the gateway module because the
// hub is internal to it; the agent packages it imports never import the
// gateway.
package agente2e

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/agent/mcpclient"
	"ironcurtain.dev/agent/model"
	"ironcurtain.dev/agent/runner"
	"ironcurtain.dev/agent/sandbox"
	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit/audittest"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/filesystem"
	"ironcurtain.dev/gateway/internal/servers/git"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

const agentToken = "e2e-agent-token-0123456789abcdef"

// human approves or denies escalations by tool, and records what it saw.
type human struct {
	mu       sync.Mutex
	approve  map[string]bool // "server__tool" → approve
	requests []escalation.Request
}

func (h *human) Escalate(_ context.Context, r escalation.Request) (escalation.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, r)
	ok := h.approve[r.Server+"__"+r.Tool]
	res := escalation.Result{ID: r.ID, Approved: ok, Status: "denied", DecidedBy: "e2e-operator", Reason: "not in this test", DecidedAt: time.Now()}
	if ok {
		res.Status, res.Reason = "approved", "fine for this test"
	}
	return res, nil
}

// world is a gateway on httptest with a sandbox holding a git repository,
// and a directory outside the sandbox.
type world struct {
	sandbox, outside string
	audit            *audittest.Sink
	human            *human
	url              string
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func startGateway(t *testing.T, approve map[string]bool) *world {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required: %v", err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{sandbox: filepath.Join(root, "workspace"), outside: filepath.Join(root, "outside"), audit: &audittest.Sink{}, human: &human{approve: approve}}
	for _, d := range []string{w.sandbox, w.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join(w.sandbox, "repo")
	runGit(t, w.sandbox, "init", "-q", "-b", "feature", "repo")
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("# demo repo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "add", "README.md")
	runGit(t, repo, "commit", "-q", "-m", "initial")
	runGit(t, repo, "remote", "add", "origin", "https://github.com/acme/app.git")

	eng, err := policy.LoadDir(basePolicy(t, w.sandbox), policy.Settings{
		Sandbox:          w.sandbox,
		Home:             root,
		DomainAllowlists: map[string][]string{"git": {"github.com", "*.github.com"}},
	}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatalf("loading the shipped policy: %v", err)
	}
	fs, err := filesystem.New(filesystem.Config{Root: w.sandbox})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := git.New(git.Config{Sandbox: w.sandbox, MirrorDir: filepath.Join(root, "mirror"), PushChecker: eng.PushChecker()})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := session.NewStatic(map[string]string{"e2e": agentToken})
	if err != nil {
		t.Fatal(err)
	}
	hub, err := mcphub.New(mcphub.Config{CallTimeout: 30 * time.Second}, mcphub.Deps{
		Servers:   []servers.Server{fs, gs},
		Policy:    eng,
		Escalator: w.human,
		Audit:     w.audit,
		Auth:      auth,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.url = serveHub(t, hub)
	return w
}

// serveHub serves hub's MCP endpoint until the test ends, shutting the hub
// down then, and returns the endpoint's URL.
func serveHub(tb testing.TB, hub *mcphub.Hub) string {
	tb.Helper()
	srv := httptest.NewServer(hub.Handler())
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// basePolicy copies the shipped base policy into a temporary directory with
// its rules' /workspace (the default sandbox they name) moved to sandbox.
func basePolicy(t *testing.T, sandbox string) string {
	t.Helper()
	src := filepath.Join("..", "..", "policies", "base")
	dir := t.TempDir()
	for _, name := range []string{policy.AnnotationsFile, policy.DynamicListsFile, policy.CompiledPolicyFile} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == policy.CompiledPolicyFile {
			cp, err := policy.ParseCompiledPolicy(name, b)
			if err != nil {
				t.Fatal(err)
			}
			if b, err = json.Marshal(cp.RebaseWithin("/workspace", sandbox)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// session connects the agent the way ironcurtain-agent does.
func (w *world) connect(t *testing.T) (*mcpclient.Client, *[]mcpclient.Escalation, *sync.Mutex) {
	t.Helper()
	var mu sync.Mutex
	var notices []mcpclient.Escalation
	c, err := mcpclient.Connect(context.Background(), mcpclient.Config{URL: w.url, Token: agentToken, OnEscalation: func(e mcpclient.Escalation) {
		mu.Lock()
		notices = append(notices, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, &notices, &mu
}

// e2eTranscript exercises every outcome against the real policy:
// allowed writes/reads/git status, a denied write outside the sandbox, an
// escalated call a human approves (adding a remote) and one a human denies
// (a push).
const e2eTranscript = `
name: e2e
steps:
  - say: write, read back, and look at the repository
    code: |
      const root = filesystem.list_allowed_directories({}).split("\n").slice(1).map((s) => s.trim()).find(Boolean)!;
      filesystem.write_file({ path: root + "/notes.txt", content: "agent was here\n" });
      console.log(filesystem.read_text_file({ path: root + "/notes.txt" }).trim());
      console.log(git.status({ path: root + "/repo" }));
      return root;
  - expect: { status: ok, contains: ["agent was here"] }
    say: write outside the sandbox
    code: |
      try {
        filesystem.write_file({ path: "OUTSIDE/evil.txt", content: "x" });
        return "UNEXPECTED: allowed";
      } catch (e: any) {
        return { name: e.name, tool: e.tool, message: e.message };
      }
  - expect: { status: ok, contains: ["ToolError", "filesystem.write_file", "was not performed"], not_contains: ["UNEXPECTED"] }
    say: add a remote (needs a human; the human approves)
    code: |
      return git.remote({ path: "SANDBOX/repo", operation: "add", name: "fork", url: "https://github.com/acme/fork.git" });
  - expect: { status: ok }
    say: push (needs a human; the human denies)
    code: |
      try {
        git.push({ path: "SANDBOX/repo", remote: "origin", branch: "feature" });
        return "UNEXPECTED: pushed";
      } catch (e: any) {
        return { id: e.escalationId, status: e.escalationStatus, message: e.message };
      }
  - expect: { status: ok, contains: ["needed human approval (escalation", "git.push"], not_contains: ["UNEXPECTED"] }
    final: done
`

func TestAgentAgainstRealGateway(t *testing.T) {
	w := startGateway(t, map[string]bool{"git__remote": true, "git__push": false})
	client, notices, mu := w.connect(t)
	tools, err := client.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	src := strings.NewReplacer("OUTSIDE", w.outside, "SANDBOX", w.sandbox).Replace(e2eTranscript)
	m, err := model.ParseTranscript([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var results []sandbox.Result
	out := runner.Run(context.Background(), runner.Config{
		Model:  m,
		Tools:  tools,
		Caller: runner.MCPCaller{Client: client},
		Observer: runner.ObserverFunc(func(e runner.Event) {
			if e.Kind == runner.EventResult {
				results = append(results, *e.Result)
			}
		}),
	}, "exercise the gateway")
	if out.Status != runner.Finished || out.Answer != "done" {
		for i, r := range results {
			t.Logf("step %d:\n%s", i+1, r.Report())
		}
		t.Fatalf("outcome = %v: %s", out.Status, out.Reason)
	}

	// What really happened on disk.
	if b, err := os.ReadFile(filepath.Join(w.sandbox, "notes.txt")); err != nil || string(b) != "agent was here\n" {
		t.Errorf("allowed write did not land: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(w.outside, "evil.txt")); !os.IsNotExist(err) {
		t.Errorf("denied write outside the sandbox landed: %v", err)
	}
	if remotes := runGit(t, filepath.Join(w.sandbox, "repo"), "remote"); !strings.Contains(remotes, "fork") {
		t.Errorf("approved remote add did not happen: %q", remotes)
	}

	// The denial says what and why; the escalation names its id and status.
	var denied struct{ Name, Tool, Message string }
	if err := json.Unmarshal([]byte(results[1].Value), &denied); err != nil {
		t.Fatalf("step 2 value %q: %v", results[1].Value, err)
	}
	if denied.Name != "ToolError" || !strings.Contains(denied.Message, w.outside+"/evil.txt") {
		t.Errorf("denial = %+v", denied)
	}
	var pushed struct{ ID, Status, Message string }
	if err := json.Unmarshal([]byte(results[3].Value), &pushed); err != nil {
		t.Fatalf("step 4 value %q: %v", results[3].Value, err)
	}
	if pushed.ID == "" || pushed.Status == "approved" || !strings.Contains(pushed.Message, pushed.ID) {
		t.Errorf("escalated push = %+v", pushed)
	}

	// The gateway's side: every call has a write-ahead decision, the
	// refusal and both escalations among them, and the human saw exactly
	// the two escalations.
	want := map[string]string{"filesystem/write_file": "", "git/remote": "escalate", "git/push": "escalate"}
	got := map[string][]string{}
	for _, d := range w.audit.Decisions() {
		got[d.Server+"/"+d.Tool] = append(got[d.Server+"/"+d.Tool], d.Decision)
		if d.Decision == "escalate" && d.EscalationID == "" {
			t.Errorf("escalate decision without an escalation id: %+v", d)
		}
	}
	if !contains(got["filesystem/write_file"], "deny") || !contains(got["filesystem/write_file"], "allow") {
		t.Errorf("write_file decisions = %v", got["filesystem/write_file"])
	}
	for k, status := range want {
		if status != "" && !contains(got[k], status) {
			t.Errorf("%s decisions = %v, want %s", k, got[k], status)
		}
	}
	w.human.mu.Lock()
	var asked []string
	for _, r := range w.human.requests {
		asked = append(asked, r.Server+"__"+r.Tool)
	}
	w.human.mu.Unlock()
	if strings.Join(asked, ",") != "git__remote,git__push" {
		t.Errorf("escalations shown to the human = %v", asked)
	}

	// The agent saw the escalations as notices (pending, then decided).
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		var seen []string
		for _, n := range *notices {
			seen = append(seen, n.Tool+":"+n.Status)
		}
		mu.Unlock()
		s := strings.Join(seen, ",")
		if strings.Contains(s, "git__remote:pending") && strings.Contains(s, "git__remote:approved") &&
			strings.Contains(s, "git__push:pending") && strings.Contains(s, "git__push:denied") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("escalation notices seen by the agent: %v", seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDemoTranscript runs the shipped offline demo (agent/transcripts/
// demo.yaml) against the real gateway, with a human who approves.
func TestDemoTranscript(t *testing.T) {
	w := startGateway(t, map[string]bool{"filesystem__move_file": true})
	client, _, _ := w.connect(t)
	tools, err := client.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.LoadReplay(filepath.Join("..", "..", "..", "agent", "transcripts", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	out := runner.Run(context.Background(), runner.Config{Model: m, Tools: tools, Caller: runner.MCPCaller{Client: client},
		Observer: runner.ObserverFunc(func(e runner.Event) {
			if e.Kind == runner.EventResult {
				reports = append(reports, e.Result.Report())
			}
		})}, "demo")
	if out.Status != runner.Finished {
		t.Fatalf("demo: %v: %s\n%s", out.Status, out.Reason, strings.Join(reports, "\n"))
	}
	if _, err := os.Stat("/etc/ironcurtain-demo.txt"); !os.IsNotExist(err) {
		t.Errorf("the demo's write outside the sandbox landed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.sandbox, "ironcurtain-demo.deleted")); err != nil {
		t.Errorf("the approved deletion did not happen: %v", err)
	}
	// The deletion (move_file deletes its source) went to the human: the
	// engine leaves delete-path in the sandbox to the rules, which escalate.
	w.human.mu.Lock()
	var asked []string
	for _, r := range w.human.requests {
		asked = append(asked, r.Server+"__"+r.Tool)
	}
	w.human.mu.Unlock()
	if strings.Join(asked, ",") != "filesystem__move_file" {
		t.Errorf("escalations shown to the human = %v, want the deletion only", asked)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
