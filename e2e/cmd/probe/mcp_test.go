package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeMCP is a streamable HTTP endpoint: initialize hands out a session,
// tools/call answers as JSON or (sse) as an event stream with a
// notification first. It checks the token and the session header.
func fakeMCP(t *testing.T, name string, sse bool, calls *atomic.Int64) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var m struct {
			ID     *int64 `json:"id"`
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m.Method != "initialize" && r.Header.Get("Mcp-Session-Id") != "sid-"+name {
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "sid-"+name)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"result":{"protocolVersion":"2025-06-18"}}`, *m.ID)
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "tools/call":
			calls.Add(1)
			res := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"%s via %s"}],"isError":%v}}`,
				*m.ID, m.Params.Name, name, m.Params.Name == "bad")
			if !sse {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, res)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
			_, _ = io.WriteString(w, "event: message\ndata: "+res+"\n\n")
		default:
			http.Error(w, "unexpected "+m.Method, http.StatusBadRequest)
		}
	}))
}

func TestMCPPlanOverTwoEndpoints(t *testing.T) {
	var na, nb atomic.Int64
	a := fakeMCP(t, "a", false, &na)
	defer a.Close()
	b := fakeMCP(t, "b", true, &nb)
	defer b.Close()
	plan := map[string]any{
		"endpoints": []string{a.URL, b.URL},
		"workers":   3,
		"calls": []map[string]any{
			{"endpoint": 0, "tool": "x__one", "args": map[string]string{"k": "v"}},
			{"endpoint": 1, "tool": "x__two"},
			{"endpoint": 1, "tool": "bad"},
			{"endpoint": 0, "tool": "x__four"},
		},
	}
	in, _ := json.Marshal(plan)
	env := func(k string) string {
		if k == "IRONCURTAIN_AGENT_TOKEN" {
			return "tok"
		}
		return ""
	}
	rep, err := mcpCmd(strings.NewReader(string(in)), env)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		text  string
		isErr bool
	}{{"x__one via a", false}, {"x__two via b", false}, {"bad via b", true}, {"x__four via a", false}}
	for i, w := range want {
		c := rep.Calls[i]
		if c.Text != w.text || c.IsError != w.isErr || c.Err != "" || c.Start == 0 || c.End < c.Start {
			t.Errorf("call %d = %+v, want %q (isError %v)", i, c, w.text, w.isErr)
		}
	}
	if na.Load() != 2 || nb.Load() != 2 {
		t.Errorf("calls per endpoint a=%d b=%d, want 2 each", na.Load(), nb.Load())
	}
}

func TestMCPPlanTransportErrorGoesOn(t *testing.T) {
	var n atomic.Int64
	a := fakeMCP(t, "a", false, &n)
	defer a.Close()
	b := fakeMCP(t, "b", false, &n)
	in := fmt.Sprintf(`{"endpoints":[%q,%q],"skip_after_error":true,"calls":[{"endpoint":1,"tool":"x__y"},{"endpoint":0,"tool":"x__z"},{"endpoint":1,"tool":"x__w"}]}`, a.URL, b.URL)
	env := func(string) string { return "tok" }
	// b goes away after the sessions are open: its call fails in
	// transport, a's still runs.
	closed := make(chan struct{})
	orig := b.Config.Handler
	b.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-closed:
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
		default:
			orig.ServeHTTP(w, r)
			if strings.Contains(r.Header.Get("Mcp-Session-Id"), "sid-b") {
				close(closed)
			}
		}
	})
	defer b.Close()
	rep, err := mcpCmd(strings.NewReader(in), env)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls[0].Err == "" || rep.Calls[0].Err == mcpSkipped || rep.Calls[1].Err != "" || rep.Calls[1].Text != "x__z via a" || rep.Calls[2].Err != mcpSkipped {
		t.Errorf("calls = %+v, want a transport error on b, an answer from a, then b skipped", rep.Calls)
	}
}

func TestMCPPlanRefusals(t *testing.T) {
	tests := []struct {
		name, plan, token string
	}{
		{name: "not JSON", plan: "{", token: "tok"},
		{name: "no endpoint", plan: `{"calls":[]}`, token: "tok"},
		{name: "endpoint out of range", plan: `{"endpoints":["http://127.0.0.1:1"],"calls":[{"endpoint":1,"tool":"a__b"}]}`, token: "tok"},
		{name: "no token", plan: `{"endpoints":["http://127.0.0.1:1"]}`, token: ""},
		{name: "endpoint down", plan: `{"endpoints":["http://127.0.0.1:1"]}`, token: "tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := mcpCmd(strings.NewReader(tt.plan), func(string) string { return tt.token }); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func FuzzReadRPCAnswer(f *testing.F) {
	f.Add("text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	f.Add("application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`)
	f.Add("text/event-stream", "data: {\ndata: }\n\n")
	f.Fuzz(func(t *testing.T, ct, body string) {
		res, err := readRPCAnswer(ct, strings.NewReader(body), 1)
		if err == nil && res != nil && !json.Valid(res) {
			t.Errorf("result %q of %q is not JSON", res, body)
		}
	})
}

func TestMCPPlanSwapSessions(t *testing.T) {
	var n atomic.Int64
	a := fakeMCP(t, "a", false, &n)
	defer a.Close()
	b := fakeMCP(t, "b", false, &n)
	defer b.Close()
	in := fmt.Sprintf(`{"endpoints":[%q,%q],"swap_sessions":true,"calls":[{"endpoint":0,"tool":"x__y"},{"endpoint":1,"tool":"x__z"}]}`, a.URL, b.URL)
	rep, err := mcpCmd(strings.NewReader(in), func(string) string { return "tok" })
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range rep.Calls {
		if !strings.Contains(c.Err, "HTTP 404") {
			t.Errorf("call %d with the other endpoint's session = %+v, want HTTP 404", i, c)
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d calls ran under a foreign session id", n.Load())
	}
}
