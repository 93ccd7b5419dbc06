package e2e_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// outageTranscript writes a file, reads one and lists the directory while
// Postgres is down: every call must be refused, with a clear error.
const outageTranscript = `name: e2e-outage
steps:
  - say: I write, read and list while the database is down.
    code: |
      const out = [];
      const tries: [string, () => any][] = [
        ["write", () => filesystem.write_file({ path: "/workspace/outage/during.txt", content: "written during the outage\n" })],
        ["read", () => filesystem.read_text_file({ path: "/workspace/outage/before.txt" })],
        ["list", () => filesystem.list_directory({ path: "/workspace/outage" })],
      ];
      for (const [name, f] of tries) {
        try {
          f();
          out.push("UNEXPECTED: " + name + " ran");
        } catch (e: any) {
          out.push("refused " + name + ": " + e.message);
        }
      }
      return out.join("\n");
  - expect: { status: ok, contains: ["refused write", "refused read", "refused list", "audit log"], not_contains: ["UNEXPECTED"] }
    final: Every call was refused while the audit database was down.
`

// writeTranscript writes one file (the calls before and after the outage).
func writeTranscript(name, file string) string {
	return `name: e2e-outage-` + name + `
steps:
  - code: |
      filesystem.create_directory({ path: "/workspace/outage" });
      filesystem.write_file({ path: "/workspace/outage/` + file + `", content: "` + name + `\n" });
      return filesystem.read_text_file({ path: "/workspace/outage/` + file + `" });
  - expect: { status: ok, contains: ["` + name + `"] }
    final: written.
`
}

// TestPostgresOutage: with Postgres stopped, tool calls are refused with a
// clear error and none runs unaudited; when it is back, calls work again.
func TestPostgresOutage(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 8*time.Minute)
	const session = "outage"

	if r, err := s.RunTranscript(ctx, session, "outage-before", []byte(writeTranscript("before", "before.txt")), "write"); err != nil || r.Code != 0 {
		t.Fatalf("before the outage: %v %s", err, r)
	}

	if err := s.StopPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted { // leave the stack usable for the next scenario
			_ = s.StartPostgres(ctx)
		}
	})

	t.Run("readyz reports the outage", func(t *testing.T) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, err := s.Readyz(ctx)
			if err == nil && code == http.StatusServiceUnavailable {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz answered %d (%v) with Postgres down, want 503", code, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})

	t.Run("calls are refused, clearly and promptly", func(t *testing.T) {
		begin := time.Now()
		r, err := s.RunTranscript(ctx, session, "outage-during", []byte(outageTranscript), "work during the outage", "-v")
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		t.Logf("run during the outage took %s:\n%s", took.Round(100*time.Millisecond), lastLines(r.Stderr, 20))
		if r.Code != 0 {
			t.Fatalf("run during the outage: %s", r)
		}
		if took > 90*time.Second {
			t.Errorf("refusing three calls took %s", took)
		}
		if ok, err := s.WorkspaceExists(ctx, "outage/during.txt"); err != nil || ok {
			t.Errorf("during.txt exists = %v (%v): a call ran while its decision could not be recorded", ok, err)
		}
		if st, err := s.Gateway.State(ctx); err != nil || !st.Running {
			t.Fatalf("the gateway is not running during the outage: %+v %v", st, err)
		}
	})

	if err := s.StartPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	begin := time.Now()
	if err := s.WaitGatewayReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("ready %s after Postgres started again", time.Since(begin).Round(100*time.Millisecond))

	t.Run("calls work again", func(t *testing.T) {
		// /readyz pings the database; the audit sink finds it back on its own
		// back-off (at most audit.BackoffMax, 2 s, jittered). A call in between
		// is refused, and did not run: the agent may retry. Calls must work
		// again within a few seconds, never by a call running unrecorded.
		ready := time.Now()
		deadline := ready.Add(15 * time.Second)
		for attempt := 1; ; attempt++ {
			r, err := s.RunTranscript(ctx, session, "outage-after", []byte(writeTranscript("after", "after.txt")), "write", "-v")
			if err != nil {
				t.Fatal(err)
			}
			if r.Code == 0 {
				t.Logf("calls work again %s after /readyz said ready (attempt %d)", time.Since(ready).Round(100*time.Millisecond), attempt)
				return
			}
			if !strings.Contains(r.Stderr, "could not record the call in its audit log") || time.Now().After(deadline) {
				t.Fatalf("after the outage (attempt %d): %s", attempt, r)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})

	t.Run("nothing ran unaudited", func(t *testing.T) {
		calls := toolCalls(t, ctx, s, session)
		written := map[string]bool{}
		for _, c := range calls {
			t.Logf("tool_calls %s", c)
			if strings.Contains(c.Args, "during.txt") {
				if c.Outcome == "ok" {
					t.Errorf("a call on during.txt ran: %s", c)
				}
			}
			if c.Tool == "write_file" && c.Decision == "allow" && c.Outcome == "ok" {
				for _, f := range []string{"before.txt", "after.txt", "during.txt"} {
					if strings.Contains(c.Args, f) {
						written[f] = true
					}
				}
			}
		}
		checkWorkspace(t, ctx, s, map[string]bool{"outage/before.txt": true, "outage/after.txt": true, "outage/during.txt": false})
		paths, err := s.GatewayPaths(ctx, "/workspace/outage")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, ".txt") {
				name := p[strings.LastIndex(p, "/")+1:]
				if !written[name] {
					t.Errorf("%s exists without an audited, allowed write", p)
				}
			}
		}
		verifyChain(t, ctx, s, session, 8)
	})
}
