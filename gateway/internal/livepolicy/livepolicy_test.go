package livepolicy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/policy"
)

const ann = `{"servers": {"s": {"tools": [{"toolName": "t", "serverName": "s", "args": {"a": ["none"]}}]}}}`

func writePolicy(t *testing.T, dir, then string) {
	t.Helper()
	files := map[string]string{
		policy.CompiledPolicyFile: `{"rules": [{"name": "r-` + then + `", "if": {}, "then": "` + then + `", "reason": "x"}]}`,
		policy.AnnotationsFile:    ann,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newLive(t *testing.T, dir string) (*Policy, *prometheus.Registry, *bytes.Buffer) {
	t.Helper()
	load := func() (*policy.Engine, error) { return policy.LoadDir(dir, policy.Settings{}) }
	e, err := load()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	p, err := New(e, load, reg, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return p, reg, &logs
}

func decide(p *Policy) policy.Decision {
	return p.Evaluate(context.Background(), policy.Request{Server: "s", Tool: "t", Args: map[string]any{"a": "x"}}).Decision
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "allow")
	p, reg, logs := newLive(t, dir)
	v0 := p.Version()
	if d := decide(p); d.Status != policy.Allow {
		t.Fatalf("initial decision %s", d.Status)
	}
	if got := testutil.ToFloat64(p.info.WithLabelValues(v0)); got != 1 {
		t.Errorf("ironcurtain_policy_info{version=%q} = %v, want 1", v0, got)
	}

	t.Run("unchanged", func(t *testing.T) {
		res, err := p.Reload(context.Background(), "test")
		if err != nil || res.Result != ResultUnchanged || res.Version != v0 || res.Previous != v0 {
			t.Fatalf("Reload = %+v, %v; want unchanged at %s", res, err, v0)
		}
	})

	snapshot := p.Snapshot()
	t.Run("changed", func(t *testing.T) {
		writePolicy(t, dir, "deny")
		res, err := p.Reload(context.Background(), "test")
		if err != nil || res.Result != ResultChanged || res.Previous != v0 || res.Version == v0 || res.Version != p.Version() {
			t.Fatalf("Reload = %+v, %v", res, err)
		}
		if d := decide(p); d.Status != policy.Deny || d.Rule != "r-deny" {
			t.Errorf("after the reload: %s by %s, want deny by r-deny", d.Status, d.Rule)
		}
		// A snapshot taken before the swap still decides by the old policy.
		if d := snapshot.Evaluate(context.Background(), policy.Request{Server: "s", Tool: "t", Args: map[string]any{"a": "x"}}).Decision; d.Status != policy.Allow {
			t.Errorf("the old snapshot now decides %s", d.Status)
		}
		n, err := testutil.GatherAndCount(reg, "ironcurtain_policy_info")
		if err != nil || n != 1 {
			t.Errorf("ironcurtain_policy_info has %d series (%v), want 1 (the old version's series is removed)", n, err)
		}
		if got := testutil.ToFloat64(p.info.WithLabelValues(p.Version())); got != 1 {
			t.Errorf("info for the new version = %v", got)
		}
	})

	failures := []struct {
		name  string
		edit  func()
		wants string
	}{
		{name: "syntax error", edit: func() {
			if err := os.WriteFile(filepath.Join(dir, policy.CompiledPolicyFile), []byte(`{"rules": [`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, wants: "compiled-policy.json"},
		{name: "unknown role", edit: func() {
			if err := os.WriteFile(filepath.Join(dir, policy.AnnotationsFile), []byte(strings.Replace(ann, `"none"`, `"read-paths"`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, wants: `unknown role "read-paths"`},
		{name: "policy file removed", edit: func() {
			if err := os.Remove(filepath.Join(dir, policy.CompiledPolicyFile)); err != nil {
				t.Fatal(err)
			}
		}, wants: "no such file"},
	}
	for _, tt := range failures {
		t.Run("failed: "+tt.name, func(t *testing.T) {
			writePolicy(t, dir, "deny")
			before := p.Version()
			failedBefore := testutil.ToFloat64(p.reloads.WithLabelValues(ResultFailed))
			tt.edit()
			res, err := p.Reload(context.Background(), "test")
			if err == nil || !strings.Contains(err.Error(), tt.wants) || res.Result != ResultFailed || !strings.Contains(res.Error, tt.wants) {
				t.Fatalf("Reload = %+v, %v; want a failure naming %q", res, err, tt.wants)
			}
			if p.Version() != before || res.Version != before {
				t.Errorf("a failed reload changed the version: %s → %s", before, p.Version())
			}
			if d := decide(p); d.Status != policy.Deny || d.Rule != "r-deny" {
				t.Errorf("after a failed reload: %s by %s, want the old policy's deny by r-deny", d.Status, d.Rule)
			}
			if got := testutil.ToFloat64(p.reloads.WithLabelValues(ResultFailed)); got != failedBefore+1 {
				t.Errorf("failed reloads %v, want %v", got, failedBefore+1)
			}
			if !strings.Contains(logs.String(), "policy reload failed") {
				t.Errorf("no log line for the failure: %s", logs.String())
			}
		})
	}
}

func TestReloadLoaderErrors(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "allow")
	p, _, _ := newLive(t, dir)
	p.load = func() (*policy.Engine, error) { return nil, nil }
	if _, err := p.Reload(context.Background(), "test"); err == nil {
		t.Error("a loader returning no engine and no error was accepted")
	}
	boom := errors.New("boom")
	p.load = func() (*policy.Engine, error) { return nil, boom }
	if _, err := p.Reload(context.Background(), "test"); !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap the loader's", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Reload(ctx, "test"); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, err := New(nil, p.load, nil, nil); err == nil {
		t.Error("New accepted a nil engine")
	}
}

func TestOnSignal(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "allow")
	p, _, _ := newLive(t, dir)
	v0 := p.Version()
	writePolicy(t, dir, "deny")
	sig := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.OnSignal(ctx, sig) }()
	sig <- syscall.SIGHUP
	deadline := time.Now().Add(10 * time.Second)
	for p.Version() == v0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if p.Version() == v0 {
		t.Fatal("SIGHUP did not reload")
	}
}

// BenchmarkReloadShipped measures a reload of the shipped policy
// (gateway/policies/base) with the settings of a default deployment.
func BenchmarkReloadShipped(b *testing.B) {
	dir := filepath.Join("..", "..", "policies", "base")
	s := policy.Settings{Sandbox: b.TempDir(), ConfinedServers: policy.BuiltinConfinedServers(),
		DomainAllowlists: map[string][]string{"fetch": {"*"}}}
	load := func() (*policy.Engine, error) { return policy.LoadDir(dir, s) }
	e, err := load()
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(e, load, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Reload(context.Background(), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReloadShadow: the shadow policy is part of the bundle: a change to it
// changes the version, and a shadow that does not load fails the whole
// reload (the old policy and shadow stay).
func TestReloadShadow(t *testing.T) {
	dir, shadowDir := t.TempDir(), t.TempDir()
	writePolicy(t, dir, "allow")
	writePolicy(t, shadowDir, "deny")
	s := policy.Settings{ShadowPolicyDir: shadowDir}
	load := func() (*policy.Engine, error) { return policy.LoadDir(dir, s) }
	e, err := load()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(e, load, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v0 := p.Version()
	shadowOf := func() string {
		ev := p.Evaluate(context.Background(), policy.Request{Server: "s", Tool: "t", Args: map[string]any{"a": "x"}})
		if ev.Shadow == nil {
			t.Fatal("no shadow decision")
		}
		return ev.Shadow.Rule
	}
	writePolicy(t, shadowDir, "escalate")
	res, err := p.Reload(context.Background(), "test")
	if err != nil || res.Result != ResultChanged || !res.Shadow || shadowOf() != "r-escalate" {
		t.Fatalf("Reload after a shadow change = %+v, %v; shadow rule %s", res, err, shadowOf())
	}
	v1 := p.Version()
	if v1 == v0 {
		t.Fatal("changing the shadow policy kept the version")
	}
	if err := os.WriteFile(filepath.Join(shadowDir, policy.CompiledPolicyFile), []byte(`{"rules": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = p.Reload(context.Background(), "test")
	if err == nil || !strings.Contains(err.Error(), "shadow") || res.Result != ResultFailed {
		t.Fatalf("Reload with a broken shadow = %+v, %v; want a failure naming the shadow policy", res, err)
	}
	if p.Version() != v1 || shadowOf() != "r-escalate" || decide(p).Status != policy.Allow {
		t.Errorf("a failed shadow reload changed the policy in force")
	}
}
