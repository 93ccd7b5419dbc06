package github

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit/audittest"
	"ironcurtain.dev/gateway/internal/servers"
)

// TestRequestsRecordEgress: every GitHub API request a tool call makes is
// an egress row linked to the call (tool_call_id, session) with its method,
// host, port and byte counts; before this no egress_events row carried the
// github server's tool_call_id. A failed write fails the call; without a
// sink nothing is sent.
func TestRequestsRecordEgress(t *testing.T) {
	fake, ts := newFakeGitHub(t)
	sink := &audittest.Sink{}
	s, err := New(Config{APIURL: ts.URL, Token: testToken, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(ts.URL)
	port, _ := strconv.Atoi(u.Port())
	call := func(id, tool string, args map[string]any) servers.Result {
		ctx := servers.WithCallInfo(context.Background(), servers.CallInfo{CallID: id, SessionID: "s1"})
		res, err := s.Call(ctx, tool, args)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call("c-comment", "pr_comment", map[string]any{"owner": "acme", "repo": "app", "number": 2.0, "body": "LGTM"}); res.IsError {
		t.Fatalf("pr_comment: %+v", res)
	}
	if res := call("c-view", "pr_view", map[string]any{"owner": "acme", "repo": "app", "number": 99.0}); !res.IsError {
		t.Fatalf("pr_view of a missing PR: %+v", res)
	}
	rows := sink.Egress()
	want := []string{"c-comment GET", "c-comment POST", "c-view GET"}
	if len(rows) != len(want) || len(rows) != len(fake.callLog()) {
		t.Fatalf("%d rows for %d API calls (%v), want %v", len(rows), len(fake.callLog()), fake.callLog(), want)
	}
	for i, ev := range rows {
		if got := ev.ToolCallID + " " + ev.Method; got != want[i] {
			t.Errorf("row %d = %q, want %q", i, got, want[i])
		}
		if ev.SessionID != "s1" || ev.Kind != "github-api" || ev.Host != u.Hostname() || ev.Port != port || ev.Decision != "allow" || ev.BytesDown == 0 || ev.ID == "" {
			t.Errorf("row %d: %+v", i, ev)
		}
	}
	if rows[1].BytesUp == 0 {
		t.Errorf("the POST's body was not counted: %+v", rows[1])
	}

	sink.FailWith(errors.New("audit database unavailable"))
	if res := call("c-fail", "pr_view", map[string]any{"owner": "acme", "repo": "app", "number": 2.0}); !res.IsError || strings.Contains(res.Content[0].Text, "body of 2") || !strings.Contains(res.Content[0].Text, "could not record") {
		t.Fatalf("a call whose egress could not be recorded returned data: %+v", res)
	}

	nosink, err := New(Config{APIURL: ts.URL, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	n := len(fake.callLog())
	res, _ := nosink.Call(context.Background(), "pr_view", map[string]any{"owner": "acme", "repo": "app", "number": 2.0})
	if !res.IsError || len(fake.callLog()) != n || !strings.Contains(res.Content[0].Text, "could not record") {
		t.Fatalf("a server without a sink reached the API: %+v", res)
	}
}
