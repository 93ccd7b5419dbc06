package llmrelay

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// TestPathAllowlist: only the model API paths are relayed; traversal,
// encoded separators, other endpoints and other providers are refused
// before anything goes upstream.
func TestPathAllowlist(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		target     string // raw request target, sent as is
		wantStatus int
		wantPath   string // upstream path when relayed
	}{
		{name: "anthropic messages", method: "POST", target: "/llm/anthropic/v1/messages", wantStatus: 200, wantPath: "/v1/messages"},
		{name: "anthropic count_tokens with beta query", method: "POST", target: "/llm/anthropic/v1/messages/count_tokens?beta=true", wantStatus: 200, wantPath: "/v1/messages/count_tokens"},
		{name: "openai chat", method: "POST", target: "/llm/openai/chat/completions", wantStatus: 200, wantPath: "/v1/chat/completions"},
		{name: "openai model id", method: "GET", target: "/llm/openai/models/gpt-4o", wantStatus: 200, wantPath: "/v1/models/gpt-4o"},
		{name: "openai model id escaped colon", method: "GET", target: "/llm/openai/models/ft%3Agpt-4o", wantStatus: 200, wantPath: "/v1/models/ft:gpt-4o"},

		{name: "anthropic legacy complete", method: "POST", target: "/llm/anthropic/v1/complete", wantStatus: 404},
		{name: "anthropic batches", method: "POST", target: "/llm/anthropic/v1/messages/batches", wantStatus: 404},
		{name: "anthropic files", method: "GET", target: "/llm/anthropic/v1/files", wantStatus: 404},
		{name: "anthropic dot-dot", method: "POST", target: "/llm/anthropic/v1/messages/../../admin", wantStatus: 404},
		{name: "anthropic encoded dot-dot", method: "POST", target: "/llm/anthropic/v1/messages/%2e%2e/%2e%2e/admin", wantStatus: 404},
		{name: "anthropic encoded slash", method: "POST", target: "/llm/anthropic/v1%2fmessages", wantStatus: 404},
		{name: "anthropic double slash", method: "POST", target: "/llm/anthropic//v1/messages", wantStatus: 404},
		{name: "anthropic trailing slash", method: "POST", target: "/llm/anthropic/v1/messages/", wantStatus: 404},
		{name: "anthropic case", method: "POST", target: "/llm/anthropic/V1/Messages", wantStatus: 404},
		{name: "openai files", method: "POST", target: "/llm/openai/files", wantStatus: 404},
		{name: "openai fine-tuning", method: "POST", target: "/llm/openai/fine_tuning/jobs", wantStatus: 404},
		{name: "openai model traversal", method: "GET", target: "/llm/openai/models/..", wantStatus: 404},
		{name: "openai model encoded traversal", method: "GET", target: "/llm/openai/models/%2e%2e%2f%2e%2e%2forganization", wantStatus: 404},
		{name: "openai model with slash", method: "GET", target: "/llm/openai/models/a/b", wantStatus: 404},
		{name: "openai model with backslash", method: "GET", target: "/llm/openai/models/a%5cb", wantStatus: 404},
		{name: "openai model with NUL", method: "GET", target: "/llm/openai/models/a%00b", wantStatus: 404},
		{name: "openai model with at", method: "GET", target: "/llm/openai/models/a@evil.example", wantStatus: 404},
		{name: "openai chat GET", method: "GET", target: "/llm/openai/chat/completions", wantStatus: 405},
		{name: "openai models DELETE", method: "DELETE", target: "/llm/openai/models/gpt-4o", wantStatus: 405},
		{name: "anthropic messages GET", method: "GET", target: "/llm/anthropic/v1/messages", wantStatus: 405},
		{name: "unknown provider", method: "POST", target: "/llm/gemini/v1/models", wantStatus: 404},
		{name: "provider without path", method: "POST", target: "/llm/anthropic", wantStatus: 404},
		{name: "long query", method: "POST", target: "/llm/anthropic/v1/messages?x=" + strings.Repeat("a", 2000), wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			conn, err := net.Dial("tcp", tr.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			body := ""
			if tt.method == "POST" {
				body = anthropicBody
			}
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: gw\r\nX-Api-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
				tt.method, tt.target, tokenS1, len(body), body)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// Go's ServeMux answers some unclean paths with a redirect to
			// the clean one; that is a refusal too, as long as nothing
			// went upstream.
			redirected := resp.StatusCode == http.StatusMovedPermanently || resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect
			if resp.StatusCode != tt.wantStatus && !(tt.wantStatus == 404 && redirected) {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			reqs := tr.model.requests()
			if tt.wantStatus != 200 {
				if len(reqs) != 0 {
					t.Fatalf("a refused path reached the model server: %+v", reqs[0].Path)
				}
				return
			}
			if len(reqs) != 1 || reqs[0].Path != tt.wantPath {
				t.Fatalf("upstream saw %+v", reqs)
			}
		})
	}
}

// TestPathAllowlistHandler drives the handler directly (no ServeMux
// cleaning), so unclean paths reach the relay's own checks.
func TestPathAllowlistHandler(t *testing.T) {
	tr := startRelay(t)
	tests := []struct {
		name string
		path string
	}{
		{name: "dot-dot", path: "/llm/anthropic/v1/messages/../../x"},
		{name: "dot", path: "/llm/anthropic/v1/./messages"},
		{name: "double slash", path: "/llm/anthropic//v1/messages"},
		{name: "model dot-dot", path: "/llm/openai/models/../../admin"},
		{name: "outside prefix", path: "/other/anthropic/v1/messages"},
		{name: "prefix only", path: "/llm/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://gw"+"/x", strings.NewReader(anthropicBody))
			req.URL.Path = tt.path
			req.Header.Set("X-Api-Key", tokenS1)
			w := &recorder{h: http.Header{}}
			tr.relay.Handler().ServeHTTP(w, req)
			if w.code != http.StatusNotFound {
				t.Fatalf("status %d", w.code)
			}
			if len(tr.model.requests()) != 0 {
				t.Fatal("reached the model server")
			}
		})
	}
}

// TestRequestBodyChecks: size cap, not-JSON, duplicate and case-variant
// members.
func TestRequestBodyChecks(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantModel  string // model recorded for an accepted body
	}{
		{name: "too large", body: `{"model":"x","pad":"` + strings.Repeat("a", 2048) + `"}`, wantStatus: 413},
		{name: "not json", body: `model=claude`, wantStatus: 400},
		{name: "array", body: `[{"model":"x"}]`, wantStatus: 400},
		{name: "trailing data", body: `{"model":"x"}{"model":"y"}`, wantStatus: 400},
		{name: "duplicate model", body: `{"model":"claude-haiku-4-5","model":"claude-opus-4-1"}`, wantStatus: 400},
		{name: "case variant is another member", body: `{"model":"claude-opus-4-1","MODEL":"claude-haiku-4-5"}`, wantStatus: 200, wantModel: "claude-haiku-4-5-20251001"},
		{name: "empty", body: ``, wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t, withConfig(func(c *Config) { c.MaxBodyBytes = 1024 }))
			resp, body := tr.anthropic(t, tokenS1, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if tt.wantStatus != 200 {
				errorMessage(t, llmprovider.Anthropic, body)
				if len(tr.model.requests()) != 0 {
					t.Fatal("a refused body went upstream")
				}
				return
			}
			if c := tr.sink.waitCalls(t, 1)[0]; c.Model != tt.wantModel {
				t.Fatalf("model %q", c.Model)
			}
		})
	}
}

// TestSlowBody: a client that trickles its body is cut off and its slot
// freed; the connection's deadline does not leak into later requests.
func TestSlowBody(t *testing.T) {
	tr := startRelay(t, withConfig(func(c *Config) { c.MaxConcurrentPerSession = 1 }))
	tr.relay.bodyTimeout = 200 * time.Millisecond
	conn, err := net.Dial("tcp", tr.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /llm/anthropic/v1/messages HTTP/1.1\r\nHost: gw\r\nX-Api-Key: %s\r\nContent-Length: 1000\r\n\r\n{\"model\":", tokenS1)
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if time.Since(start) > 4*time.Second {
		t.Fatal("the slow body was not cut off")
	}
	// The session's only slot is free again, and keep-alive requests on a
	// connection that read a body work after the deadline has passed.
	if resp, body := tr.anthropic(t, tokenS1, anthropicBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	time.Sleep(300 * time.Millisecond)
	if resp, body := tr.anthropic(t, tokenS1, anthropicBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("keep-alive request after the body deadline: status %d: %s", resp.StatusCode, body)
	}
}
