package git

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/servers"
)

// TestNetworkOperationsRecordEgress: every git network operation a tool call
// makes (fetch, pull, clone's ls-remote and fetch, push) writes an egress
// row linked to the call (tool_call_id, session), naming the remote's host
// and port; before this, no egress_events row carried their tool_call_id.
// Without a sink nothing is sent; a failed write fails the call.
func TestNetworkOperationsRecordEgress(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	url := e.h.url("app.git")
	host, portText, _ := strings.Cut(e.h.host, ":")
	port, _ := strconv.Atoi(portText)
	call := func(id, arg string) servers.CallInfo {
		return servers.CallInfo{CallID: id, SessionID: "s1", PolicyArgs: map[string]any{arg: url}}
	}
	mustOK(t, e.callInfo(call("c-fetch", "remote"), "fetch", map[string]any{"path": e.repo}))
	mustOK(t, e.callInfo(call("c-pull", "remote"), "pull", map[string]any{"path": e.repo, "ff_only": true}))
	mustOK(t, e.callInfo(call("c-clone", "url"), "clone", map[string]any{"url": url, "path": filepath.Join(e.sandbox, "cloned")}))
	rawGit(t, e.repo, "switch", "-q", "-c", "feature")
	writeFile(t, filepath.Join(e.repo, "f.txt"), "feature\n")
	rawGit(t, e.repo, "add", "f.txt")
	rawGit(t, e.repo, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "feature")
	args := map[string]any{"path": e.repo, "branch": "feature"}
	ci := e.approvedPush(t, args)
	ci.CallID, ci.SessionID = "c-push", "s1"
	mustOK(t, e.callInfo(ci, "push", args))

	want := map[string][]string{"c-fetch": {"fetch"}, "c-pull": {"fetch"}, "c-clone": {"ls-remote", "fetch"}, "c-push": {"push"}}
	got := map[string][]string{}
	for _, ev := range e.egress.Egress() {
		if ev.SessionID != "s1" || ev.Kind != "git" || ev.Host != host || ev.Port != port || ev.Decision != "allow" || ev.ID == "" || ev.Time.IsZero() || ev.Error != "" {
			t.Errorf("egress row %+v", ev)
		}
		got[ev.ToolCallID] = append(got[ev.ToolCallID], ev.Method)
	}
	for id, ops := range want {
		if strings.Join(got[id], ",") != strings.Join(ops, ",") {
			t.Errorf("call %s: egress rows %v, want %v (all: %v)", id, got[id], ops, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("rows for calls %v, want %v", got, want)
	}

	// A write that fails fails the call.
	e.egress.FailWith(errors.New("audit database unavailable"))
	mustFail(t, e.callInfo(call("c-fail", "remote"), "fetch", map[string]any{"path": e.repo}), "could not record")
	e.egress.FailWith(nil)

	// Without a sink nothing leaves.
	requests := func() int {
		e.h.mu.Lock()
		defer e.h.mu.Unlock()
		return len(e.h.auths)
	}
	n := requests()
	e.srv.sink = nil
	mustFail(t, e.callInfo(call("c-nosink", "remote"), "fetch", map[string]any{"path": e.repo}), "no audit sink")
	if requests() != n {
		t.Fatal("a fetch without a sink reached the remote")
	}
}
