package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The remote MCP server answers only with the configured bearer token and
// never logs it.
func TestRemoteMCPToken(t *testing.T) {
	const tok = "remote-secret-token"
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		name, server, auth string
		want               int
	}{
		{"no token configured", "", "Bearer " + tok, http.StatusServiceUnavailable},
		{"no header", tok, "", http.StatusUnauthorized},
		{"wrong token", tok, "Bearer other", http.StatusUnauthorized},
		{"right token", tok, "Bearer " + tok, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newRemoteMCP(c.server)
			req := httptest.NewRequest(http.MethodPost, "https://mcp.internet.test/mcp", strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			rec := httptest.NewRecorder()
			note := m.serve(rec, req)
			if rec.Code != c.want {
				t.Errorf("status %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
			if strings.Contains(note, tok) {
				t.Errorf("the note holds the token: %q", note)
			}
		})
	}
}
