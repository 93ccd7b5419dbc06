package mcphub

import (
	"context"
	"testing"

	"ironcurtain.dev/gateway/internal/session"
)

// TestCallJudgedInSessionWorkspace: the policy judges a call against the
// caller's own workspace (Request.Sandbox), and a static session's call
// against the configured sandbox (""), even when both call at once.
func TestCallJudgedInSessionWorkspace(t *testing.T) {
	f := newPipelineFixture(t, Config{}, false)
	f.pol.evals["files__read"] = allow("r", nil)
	calls := []session.Session{{ID: "static"}, {ID: "sess_a", Workspace: "/srv/ws/sess_a"}, {ID: "sess_b", Workspace: "/srv/ws/sess_b"}}
	done := make(chan struct{}, len(calls))
	for _, s := range calls {
		go func() {
			f.hub.Call(context.Background(), CallRequest{Session: s, Tool: "files__read", Args: map[string]any{"path": "/workspace/x"}})
			done <- struct{}{}
		}()
	}
	for range calls {
		<-done
	}
	f.pol.mu.Lock()
	defer f.pol.mu.Unlock()
	got := map[string]bool{}
	for _, r := range f.pol.requests {
		got[r.Sandbox] = true
	}
	for _, s := range calls {
		if !got[s.Workspace] {
			t.Errorf("no request judged with Sandbox %q (session %s): %+v", s.Workspace, s.ID, f.pol.requests)
		}
	}
	if len(f.pol.requests) != len(calls) {
		t.Fatalf("%d requests, want %d", len(f.pol.requests), len(calls))
	}
}
