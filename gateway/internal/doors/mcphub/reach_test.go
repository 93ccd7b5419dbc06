package mcphub_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/filesystem"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// approver approves every escalation and counts them: a human who says yes.
type approver struct {
	mu   sync.Mutex
	reqs []escalation.Request
}

func (a *approver) Escalate(_ context.Context, req escalation.Request) (escalation.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, req)
	return escalation.Result{ID: req.ID, Approved: true, Status: escalation.StatusApproved, DecidedBy: "alice"}, nil
}

func (a *approver) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

type discardSink struct{}

func (discardSink) Record(context.Context, audit.Event) error { return nil }

// oldReadRule is the shipped base policy's rule before issue 11: reads
// outside the sandbox escalate.
const oldReadRule = `{"rules": [
 {"name": "escalate-delete-in-sandbox", "if": {"roles": ["delete-path"], "paths": {"roles": ["delete-path"], "within": "/workspace"}}, "then": "escalate", "reason": "deletes need a human"},
 {"name": "deny-change-outside-sandbox", "if": {"roles": ["write-path", "delete-path"], "paths": {"roles": ["write-path", "delete-path"], "within": "/"}}, "then": "deny", "reason": "no changes outside"},
 {"name": "escalate-read-outside-sandbox", "if": {"roles": ["read-path"], "paths": {"roles": ["read-path"], "within": "/"}}, "then": "escalate", "reason": "reads outside need a human"}
]}`

// TestEscalationOnlyForCallsThatCanRun: through the real hub, engine and
// filesystem server (sandbox /…/srv/work, a read-only directory), a human
// is only ever asked about calls the server can run, and an approval runs
// the call. Before issue 11 a read outside the sandbox was escalated and,
// once approved, failed with "path is outside the sandbox".
func TestEscalationOnlyForCallsThatCanRun(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sandbox, ro, outside := filepath.Join(root, "srv", "work"), filepath.Join(root, "docs"), filepath.Join(root, "outside")
	for _, d := range []string{sandbox, ro, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range map[string]string{filepath.Join(sandbox, "a.txt"): "a", filepath.Join(ro, "guide.md"): "the guide", filepath.Join(outside, "secret.txt"): "secret"} {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	policies := map[string]string{"shipped": filepath.Join("..", "..", "..", "policies", "base")}
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, policy.CompiledPolicyFile), []byte(oldReadRule), 0o644); err != nil {
		t.Fatal(err)
	}
	policies["before issue 11"] = old
	for name, dir := range policies {
		t.Run(name, func(t *testing.T) {
			fs, err := filesystem.New(filesystem.Config{Root: sandbox, ReadOnlyDirs: []string{ro}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })
			eng, err := policy.LoadDir(dir, policy.Settings{Sandbox: sandbox, Home: root, ReadOnlyDirs: []string{ro},
				ConfinedServers: policy.BuiltinConfinedServers(), Annotations: annotationsOf(fs)}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
			if err != nil {
				t.Fatal(err)
			}
			// The load-time check names the old rule; the shipped policy
			// has nothing to report.
			warned := strings.Contains(strings.Join(eng.Warnings(), "\n"), `rule "escalate-read-outside-sandbox" would escalate filesystem calls`)
			if warned != (name == "before issue 11") || (name == "shipped" && len(eng.Warnings()) > 0) {
				t.Fatalf("load warnings = %q", eng.Warnings())
			}
			human := &approver{}
			auth, err := session.NewStatic(map[string]string{"s1": benchToken})
			if err != nil {
				t.Fatal(err)
			}
			hub, err := mcphub.New(mcphub.Config{}, mcphub.Deps{Servers: []servers.Server{fs}, Policy: eng, Escalator: human, Audit: discardSink{}, Auth: auth})
			if err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				name      string
				tool      string
				args      map[string]any
				escalated bool
				ok        bool
				want      string // in the result text
			}{
				{name: "read outside the sandbox", tool: "filesystem__read_text_file", args: map[string]any{"path": filepath.Join(outside, "secret.txt")}},
				{name: "read in the read-only directory", tool: "filesystem__read_text_file", args: map[string]any{"path": filepath.Join(ro, "guide.md")}, ok: true, want: "the guide"},
				{name: "write in the read-only directory", tool: "filesystem__write_file", args: map[string]any{"path": filepath.Join(ro, "guide.md"), "content": "x"}},
				{name: "move in the sandbox: asked, approved, runs", tool: "filesystem__move_file", args: map[string]any{"source": filepath.Join(sandbox, "a.txt"), "destination": filepath.Join(sandbox, "b.txt")},
					escalated: true, ok: true, want: "Successfully moved"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before := human.count()
					res := hub.Call(context.Background(), mcphub.CallRequest{Session: session.Session{ID: "s1"}, Tool: tt.tool, Args: tt.args})
					txt := resultText(res)
					if asked := human.count() > before; asked != tt.escalated {
						t.Fatalf("a human was asked: %v, want %v (%q)", asked, tt.escalated, txt)
					}
					if res.IsError == tt.ok || !strings.Contains(txt, tt.want) {
						t.Fatalf("result = %q (error %v), want ok=%v containing %q", txt, res.IsError, tt.ok, tt.want)
					}
					if strings.Contains(txt, "secret") && !tt.ok {
						t.Fatalf("refusal leaks the file: %q", txt)
					}
				})
			}
			if got, _ := os.ReadFile(filepath.Join(ro, "guide.md")); string(got) != "the guide" {
				t.Fatalf("the read-only file changed: %q", got)
			}
			// Put the moved file back for the next policy.
			_ = os.Rename(filepath.Join(sandbox, "b.txt"), filepath.Join(sandbox, "a.txt"))
		})
	}
}

func annotationsOf(s servers.Server) []policy.ToolAnnotation {
	var out []policy.ToolAnnotation
	for _, t := range s.Tools() {
		a := t.Annotation
		a.Server = s.Name()
		out = append(out, a)
	}
	return out
}

func resultText(r servers.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}
