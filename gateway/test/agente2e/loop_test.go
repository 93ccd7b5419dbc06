package agente2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/agent/model"
	"ironcurtain.dev/agent/runner"
	"ironcurtain.dev/agent/sandbox"
	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit/audittest"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/filesystem"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// loopTranscript is an agent stuck in a loop: it retries a write outside
// the sandbox (denied by policy) 44 times, then writes in the sandbox.
const loopTranscript = `
name: loop
steps:
  - say: I will keep trying until it works.
    code: |
      const out = [];
      for (let i = 0; i < 44; i++) {
        try {
          filesystem.write_file({ path: "OUTSIDE/evil-" + i + ".txt", content: "x" });
          out.push(i + ": UNEXPECTED: written");
        } catch (e: any) {
          out.push(i + ": " + e.message);
        }
      }
      try {
        filesystem.write_file({ path: "SANDBOX/after.txt", content: "after\n" });
        out.push("after: written");
      } catch (e: any) {
        out.push("after: " + e.message);
      }
      return out.join("\n");
  - expect: { status: ok, not_contains: ["UNEXPECTED"] }
    final: done
`

// TestAgentLoopIsPaused runs the scripted agent, looping on denied writes,
// against the real hub with the shipped policy and the loop breaker at its
// default limits. The call after the 40th denial in a row pauses the
// session behind one escalation; the human denies (the rest of the run is
// refused for the cooldown) or approves (the session goes on and the write
// in the sandbox lands).
func TestAgentLoopIsPaused(t *testing.T) {
	for _, approve := range []bool{false, true} {
		t.Run(map[bool]string{false: "operator denies", true: "operator approves"}[approve], func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			sb, outside := filepath.Join(root, "workspace"), filepath.Join(root, "outside")
			for _, d := range []string{sb, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			eng, err := policy.LoadDir(basePolicy(t, sb), policy.Settings{Sandbox: sb, Home: root}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
			if err != nil {
				t.Fatal(err)
			}
			fs, err := filesystem.New(filesystem.Config{Root: sb})
			if err != nil {
				t.Fatal(err)
			}
			auth, err := session.NewStatic(map[string]string{"e2e": agentToken})
			if err != nil {
				t.Fatal(err)
			}
			guard, err := loopguard.New(loopguard.Config{}, nil) // the defaults
			if err != nil {
				t.Fatal(err)
			}
			w := &world{sandbox: sb, outside: outside, audit: &audittest.Sink{}, human: &human{approve: map[string]bool{"filesystem__write_file": approve}}}
			hub, err := mcphub.New(mcphub.Config{CallTimeout: 30 * time.Second}, mcphub.Deps{
				Servers: []servers.Server{fs}, Policy: eng, Escalator: w.human, Audit: w.audit, Auth: auth, LoopGuard: guard,
			})
			if err != nil {
				t.Fatal(err)
			}
			w.url = serveHub(t, hub)
			client, _, _ := w.connect(t)
			tools, err := client.Tools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.ParseTranscript([]byte(strings.NewReplacer("OUTSIDE", outside, "SANDBOX", sb).Replace(loopTranscript)))
			if err != nil {
				t.Fatal(err)
			}
			var results []sandbox.Result
			out := runner.Run(context.Background(), runner.Config{
				Model: m, Tools: tools, Caller: runner.MCPCaller{Client: client},
				Observer: runner.ObserverFunc(func(e runner.Event) {
					if e.Kind == runner.EventResult {
						results = append(results, *e.Result)
					}
				}),
			}, "write the file")
			if out.Status != runner.Finished || len(results) == 0 {
				t.Fatalf("outcome = %v: %s", out.Status, out.Reason)
			}
			lines := strings.Split(results[0].Value, "\n")
			t.Logf("the agent saw:\n%s\n%s\n%s\n%s", lines[39], lines[40], lines[41], lines[len(lines)-1])
			if !strings.Contains(lines[39], "39: ") || strings.Contains(lines[39], "paused") {
				t.Errorf("call 39 = %q, want an ordinary policy refusal", lines[39])
			}
			if !strings.Contains(lines[40], "the agent seems stuck: 40 denied calls in a row") {
				t.Errorf("call 40 = %q, want the pause", lines[40])
			}
			_, afterErr := os.Stat(filepath.Join(sb, "after.txt"))
			if approve {
				if !strings.Contains(lines[40], "an operator let it go on") || !strings.HasSuffix(lines[len(lines)-1], "after: written") || afterErr != nil {
					t.Errorf("approved: call 40 %q, last %q, after.txt %v", lines[40], lines[len(lines)-1], afterErr)
				}
			} else {
				if !strings.Contains(lines[41], "an operator stopped this session's tool calls until") || !strings.Contains(lines[len(lines)-1], "an operator stopped") || afterErr == nil {
					t.Errorf("denied: call 41 %q, last %q, after.txt %v", lines[41], lines[len(lines)-1], afterErr)
				}
			}
			w.human.mu.Lock()
			reqs := append([]string(nil), func() []string {
				var s []string
				for _, r := range w.human.requests {
					s = append(s, r.Rule)
				}
				return s
			}()...)
			w.human.mu.Unlock()
			if strings.Join(reqs, ",") != gate.RuleLoopBreaker {
				t.Errorf("escalations = %v, want exactly one loop-breaker pause", reqs)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 0 {
				t.Errorf("%d files written outside the sandbox", len(entries))
			}
		})
	}
}
