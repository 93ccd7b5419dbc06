package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/session/minted"
)

// door sends one authenticated request through a door of the gateway and
// returns the HTTP status.
type door struct {
	name   string
	refuse int // the status of an unknown token
	send   func(t *testing.T, g servedGateway, token string) int
}

func httpStatus(t *testing.T, req *http.Request) int {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

var doors = []door{
	{name: "mcp", refuse: 401, send: func(t *testing.T, g servedGateway, tok string) int {
		req, _ := http.NewRequest("POST", "http://"+g.api+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		return httpStatus(t, req)
	}},
	{name: "model relay", refuse: 401, send: func(t *testing.T, g servedGateway, tok string) int {
		req, _ := http.NewRequest("POST", "http://"+g.api+"/llm/anthropic/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", tok)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("Content-Type", "application/json")
		return httpStatus(t, req)
	}},
	{name: "git http", refuse: 401, send: func(t *testing.T, g servedGateway, tok string) int {
		req, _ := http.NewRequest("GET", "http://"+g.api+"/git/github.com/acme/app.git/info/refs?service=git-upload-pack", nil)
		req.SetBasicAuth("x", tok)
		return httpStatus(t, req)
	}},
	{name: "github relay", refuse: 401, send: func(t *testing.T, g servedGateway, tok string) int {
		req, _ := http.NewRequest("GET", "http://"+g.api+"/github/repos/acme/app/pulls", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return httpStatus(t, req)
	}},
	{name: "egress proxy", refuse: 407, send: func(t *testing.T, g servedGateway, tok string) int {
		conn, err := net.DialTimeout("tcp", g.proxy, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		auth := base64.StdEncoding.EncodeToString([]byte("agent:" + tok))
		fmt.Fprintf(conn, "CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nProxy-Authorization: Basic %s\r\n\r\n", auth)
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}},
}

// TestMintedSessionOnEveryDoor: a session minted through the ops API works
// on every door of the agent port and on the egress proxy; once revoked,
// its token is refused on each (401, and 407 on the proxy) at the next
// request; a static token keeps working throughout.
func TestMintedSessionOnEveryDoor(t *testing.T) {
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := opsapi.NewClient("http://"+g.ops, testOperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	created, err := client.CreateSession(ctx, opsapi.CreateSessionRequest{Name: "every-door", TTL: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	tok := created.Token
	unknown := minted.TokenPrefix + strings.Repeat("A", minted.TokenLen-len(minted.TokenPrefix))
	for _, d := range doors {
		if got := d.send(t, g, unknown); got != d.refuse {
			t.Errorf("%s: an unknown minted-form token got %d, want %d", d.name, got, d.refuse)
		}
		if got := d.send(t, g, tok); got == d.refuse {
			t.Errorf("%s: the minted token was refused (%d)", d.name, got)
		}
	}
	if _, err := client.RevokeSession(ctx, created.Session.SessionID, "test"); err != nil {
		t.Fatal(err)
	}
	for _, d := range doors {
		if got := d.send(t, g, tok); got != d.refuse {
			t.Errorf("%s: the revoked token got %d, want %d", d.name, got, d.refuse)
		}
		if got := d.send(t, g, testAgentToken); got == d.refuse {
			t.Errorf("%s: the static token was refused after a revocation (%d)", d.name, got)
		}
	}
}

// TestStaticNamesCannotPoseAsMinted: a token file may not name a session
// with the minted id prefix (it could be taken for, or shadow, a minted one).
func TestStaticNamesCannotPoseAsMinted(t *testing.T) {
	static, err := session.NewStatic(map[string]string{"sess_abcdefghijklmnopqrstuvwxyz": "static-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = withMintedSessions(static, map[string]string{"sess_abcdefghijklmnopqrstuvwxyz": "static-token-0123456789"}, &storage{})
	if err == nil || !strings.Contains(err.Error(), "agent.token_files.sess_abcdefghijklmnopqrstuvwxyz") {
		t.Fatalf("err = %v", err)
	}
	a, err := withMintedSessions(static, map[string]string{"agent": "x"}, &storage{})
	if err != nil || a != session.Authenticator(static) {
		t.Fatalf("without a database: %v, %v", a, err)
	}
}
