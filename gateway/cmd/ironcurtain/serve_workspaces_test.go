package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

// mcpClient is a minimal MCP client over the agent port.
type mcpClient struct {
	url, token, sid string
}

func (c *mcpClient) post(t *testing.T, body string) (string, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp
}

func newMCPClient(t *testing.T, g servedGateway, token string) *mcpClient {
	t.Helper()
	c := &mcpClient{url: "http://" + g.api + "/mcp", token: token}
	body, resp := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	c.sid = resp.Header.Get("Mcp-Session-Id")
	c.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// call runs one tool and returns the result's text and whether it is an
// error.
func (c *mcpClient) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	a, _ := json.Marshal(args)
	body, resp := c.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, a))
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d %s", tool, resp.StatusCode, body)
	}
	if i := strings.Index(body, "data: "); i >= 0 { // an event stream
		body = strings.TrimSpace(body[i+len("data: "):])
	}
	var out struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
		Error *struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%s: %v in %q", tool, err, body)
	}
	if out.Error != nil {
		return out.Error.Message, true
	}
	var sb strings.Builder
	for _, x := range out.Result.Content {
		sb.WriteString(x.Text)
	}
	return sb.String(), out.Result.IsError
}

// TestSessionWorkspacesServed: with session_workspaces.root, two minted
// sessions working at once each write "/workspace/note.txt" (the static
// sandbox's name, as the agent sees its workspace) into their own
// directory, neither reads the other's by any name tried, the static token
// keeps the sandbox, and a revocation removes the session's directory.
func TestSessionWorkspacesServed(t *testing.T) {
	root := filepath.Join(t.TempDir(), "workspaces")
	g := startGatewayYAML(t, fmt.Sprintf("session_workspaces:\n  root: %s\n", root))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ops, err := opsapi.NewClient("http://"+g.ops, testOperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	type sess struct {
		id, dir string
		mcp     *mcpClient
	}
	var ss []sess
	for _, name := range []string{"run-a", "run-b"} {
		created, err := ops.CreateSession(ctx, opsapi.CreateSessionRequest{Name: name, TTL: "10m"})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Session.SessionID
		dir := filepath.Join(root, id)
		if m := created.Session.Minted; m == nil || m.Workspace != dir {
			t.Fatalf("session %s: the ops API does not name its workspace %s: %+v", id, dir, m)
		}
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("session %s: workspace %s not created at mint: %v", id, dir, err)
		}
		ss = append(ss, sess{id: id, dir: dir, mcp: newMCPClient(t, g, created.Token)})
	}
	var wg sync.WaitGroup
	for i, s := range ss {
		other := ss[1-i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			note := g.sandbox + "/note.txt"
			if text, isErr := s.mcp.call(t, "filesystem__write_file", map[string]any{"path": note, "content": "from " + s.id}); isErr {
				t.Errorf("session %s write %s: %s", s.id, note, text)
				return
			}
			if text, isErr := s.mcp.call(t, "filesystem__read_text_file", map[string]any{"path": note}); isErr || text != "from "+s.id {
				t.Errorf("session %s read back %s: %q (error %v)", s.id, note, text, isErr)
			}
			if text, isErr := s.mcp.call(t, "git__init", map[string]any{"path": g.sandbox + "/repo"}); isErr {
				t.Errorf("session %s git init: %s", s.id, text)
			}
			if text, isErr := s.mcp.call(t, "git__status", map[string]any{"path": filepath.Join(other.dir, "repo")}); !isErr {
				t.Errorf("session %s git status of the other's repository: %q, want refused", s.id, text)
			}
			for _, p := range []string{filepath.Join(other.dir, "note.txt"), g.sandbox + "/../workspaces/" + other.id + "/note.txt",
				filepath.Join(root, strings.ToUpper(other.id), "note.txt"), "../" + other.id + "/note.txt"} {
				if text, isErr := s.mcp.call(t, "filesystem__read_text_file", map[string]any{"path": p}); !isErr || strings.Contains(text, other.id) {
					t.Errorf("session %s read %s: %q (error %v), want refused", s.id, p, text, isErr)
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range ss {
		if fi, err := os.Stat(filepath.Join(s.dir, "repo", ".git")); err != nil || !fi.IsDir() {
			t.Errorf("session %s's repository not in its workspace: %v", s.id, err)
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "note.txt"))
		if err != nil || string(b) != "from "+s.id {
			t.Errorf("session %s's note: %q %v", s.id, b, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(g.sandbox, "note.txt")); !os.IsNotExist(err) {
		t.Errorf("a session wrote into the static sandbox: %v", err)
	}
	static := newMCPClient(t, g, testAgentToken)
	if text, isErr := static.call(t, "filesystem__read_text_file", map[string]any{"path": filepath.Join(ss[0].dir, "note.txt")}); !isErr {
		t.Errorf("the static token read a session's workspace: %q", text)
	}
	if _, err := ops.RevokeSession(ctx, ss[0].id, "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ss[0].dir); !os.IsNotExist(err) {
		t.Errorf("revoked session's workspace still there: %v", err)
	}
	if _, err := os.Lstat(ss[1].dir); err != nil {
		t.Errorf("the other session's workspace went too: %v", err)
	}
}
