package mcphub

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/livepolicy"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// reloadEngine builds a real engine that decides files__write with one
// compiled rule.
func reloadEngine(t *testing.T, rule, then string) *policy.Engine {
	t.Helper()
	p, err := policy.ParseCompiledPolicy("compiled-policy.json", []byte(fmt.Sprintf(
		`{"rules": [{"name": %q, "if": {"server": ["files"], "tool": ["write"]}, "then": %q, "reason": "test"}]}`, rule, then)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.ParseAnnotations("tool-annotations.json", []byte(
		`{"servers": {"files": {"tools": [{"toolName": "write", "serverName": "files", "args": {"note": ["none"]}}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(p, a, nil, policy.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestReloadUnderConcurrentCalls swaps two policies (one allows
// files__write by rule-a, the other denies it by rule-b) as fast as it can
// while 64 agents call; every decision record must be consistent with one
// policy: its version, rule and decision, and whether the server ran. Run
// it with -race.
func TestReloadUnderConcurrentCalls(t *testing.T) {
	a, b := reloadEngine(t, "rule-a", "allow"), reloadEngine(t, "rule-b", "deny")
	if a.Version() == b.Version() {
		t.Fatal("the two policies have the same version")
	}
	var flip atomic.Int64
	live, err := livepolicy.New(a, func() (*policy.Engine, error) {
		if flip.Add(1)%2 == 1 {
			return b, nil
		}
		return a, nil
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer("files", "write")
	sink := &memSink{}
	h, err := New(Config{}, Deps{Servers: []servers.Server{srv}, Policy: live, Audit: sink, Auth: fakeAuth{}, NewID: seqIDs()})
	if err != nil {
		t.Fatal(err)
	}

	const agents, callsEach = 64, 40
	ctx := context.Background()
	stop := make(chan struct{})
	var reloads atomic.Int64
	var swapper sync.WaitGroup
	swapper.Add(1)
	go func() {
		defer swapper.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := live.Reload(ctx, "test"); err != nil {
				t.Errorf("reload: %v", err)
				return
			}
			reloads.Add(1)
		}
	}()
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := session.Session{ID: fmt.Sprintf("agent-%d", i)}
			for j := range callsEach {
				h.Call(ctx, CallRequest{Session: sess, Tool: "files__write", Args: map[string]any{"note": fmt.Sprint(j)}})
			}
		}()
	}
	wg.Wait()
	close(stop)
	swapper.Wait()

	ran := map[string]bool{}
	srv.mu.Lock()
	for _, c := range srv.calls {
		ran[c.info.CallID] = true
	}
	srv.mu.Unlock()
	var underA, underB int
	for _, d := range sink.decisions() {
		switch d.PolicyVersion {
		case a.Version():
			underA++
			if d.Decision != "allow" || d.Rule != "rule-a" || !ran[d.CallID] {
				t.Errorf("call %s recorded under %s (allows by rule-a): decision %s by %s, ran %v", d.CallID, d.PolicyVersion, d.Decision, d.Rule, ran[d.CallID])
			}
		case b.Version():
			underB++
			if d.Decision != "deny" || d.Rule != "rule-b" || ran[d.CallID] {
				t.Errorf("call %s recorded under %s (denies by rule-b): decision %s by %s, ran %v", d.CallID, d.PolicyVersion, d.Decision, d.Rule, ran[d.CallID])
			}
		default:
			t.Errorf("call %s recorded with policy version %q, neither %s nor %s", d.CallID, d.PolicyVersion, a.Version(), b.Version())
		}
	}
	if got := underA + underB; got != agents*callsEach {
		t.Errorf("%d decisions recorded, want %d", got, agents*callsEach)
	}
	if len(ran) != underA {
		t.Errorf("the server ran %d calls, %d were allowed", len(ran), underA)
	}
	outcomes := 0
	for _, o := range sink.outcomes() {
		if o.Status == audit.OutcomeOK || o.Status == audit.OutcomeDenied {
			outcomes++
		}
	}
	if outcomes != agents*callsEach {
		t.Errorf("%d ok/denied outcomes, want %d", outcomes, agents*callsEach)
	}
	t.Logf("%d calls: %d under policy A, %d under policy B, %d reloads", agents*callsEach, underA, underB, reloads.Load())
	if underA == 0 || underB == 0 || reloads.Load() < 2 {
		t.Errorf("the swaps did not interleave with the calls (A %d, B %d, reloads %d)", underA, underB, reloads.Load())
	}
}
