package llmrelay

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// TestStreamByteIdentical: SSE arrives at the agent exactly as the model
// server sent it, for both wire formats and awkward framings.
func TestStreamByteIdentical(t *testing.T) {
	crlf := strings.ReplaceAll(anthropicSSE, "\n", "\r\n")
	tests := []struct {
		name     string
		provider string
		body     string
		send     []string // written and flushed one by one
	}{
		{name: "anthropic", provider: llmprovider.Anthropic, body: anthropicStreamBody, send: strings.SplitAfter(anthropicSSE, "\n\n")},
		{name: "anthropic CRLF split mid-line", provider: llmprovider.Anthropic, body: anthropicStreamBody, send: splitEvery(crlf, 7)},
		{name: "openai with comments", provider: llmprovider.OpenAI, body: openAIStreamBody,
			send: []string{": keep-alive\n\n", openAISSEBody, openAISSEUsageChunk[:30], openAISSEUsageChunk[30:], openAISSEDone}},
		{name: "openai CR only", provider: llmprovider.OpenAI, body: openAIStreamBody,
			send: []string{strings.ReplaceAll(openAISSEBody+openAISSEUsageChunk+openAISSEDone, "\n", "\r")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
				w.WriteHeader(http.StatusOK)
				for _, s := range tt.send {
					_, _ = io.WriteString(w, s)
					w.(http.Flusher).Flush()
				}
			}
			var resp *http.Response
			var body []byte
			if tt.provider == llmprovider.Anthropic {
				resp, body = tr.anthropic(t, tokenS1, tt.body)
			} else {
				resp, body = tr.openai(t, tokenS1, tt.body)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if want := strings.Join(tt.send, ""); string(body) != want {
				t.Fatalf("stream changed on the way:\n got %q\nwant %q", body, want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
				t.Fatalf("content type %q", ct)
			}
			c := tr.sink.waitCalls(t, 1)[0]
			if !c.Stream || c.InputTokens == 0 || c.OutputTokens == 0 || strings.Contains(c.Error, "estimated") {
				t.Fatalf("usage not read from the stream: %+v", c)
			}
		})
	}
}

func splitEvery(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// TestStreamFlushedAsItArrives: the agent reads the first event while the
// model server still holds back the rest, so the relay buffers nothing.
func TestStreamFlushedAsItArrives(t *testing.T) {
	for _, provider := range []string{llmprovider.Anthropic, llmprovider.OpenAI} {
		t.Run(provider, func(t *testing.T) {
			tr := startRelay(t)
			release := make(chan struct{})
			first, rest := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":3}}}\n\n",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n"
			if provider == llmprovider.OpenAI {
				first, rest = openAISSEBody, openAISSEUsageChunk+openAISSEDone
			}
			tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, first)
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-time.After(5 * time.Second):
				}
				_, _ = io.WriteString(w, rest)
			}
			path, body, hdr := "/anthropic/v1/messages", anthropicStreamBody, "X-Api-Key"
			val := tokenS1
			if provider == llmprovider.OpenAI {
				path, body, hdr, val = "/openai/chat/completions", openAIStreamBody, "Authorization", "Bearer "+tokenS1
			}
			req, _ := http.NewRequest(http.MethodPost, tr.url+path, strings.NewReader(body))
			req.Header.Set(hdr, val)
			resp, err := tr.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got := make([]byte, len(first))
			done := make(chan error, 1)
			go func() { _, err := io.ReadFull(resp.Body, got); done <- err }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Second):
				close(release)
				t.Fatal("the first event did not arrive before the stream ended: the relay buffers")
			}
			close(release)
			tail, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if string(got)+string(tail) != first+rest {
				t.Fatalf("stream changed: %q", string(got)+string(tail))
			}
		})
	}
}

// TestStreamCutShort: when the upstream breaks off a stream before its
// usage report, the agent's connection is cut (not ended cleanly) and the
// record carries tokens estimated from sizes, so budgets still count it.
func TestStreamCutShort(t *testing.T) {
	tr := startRelay(t)
	tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, openAISSEBody)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	err := readStream(t, tr)
	if err == nil {
		t.Fatal("a stream cut short upstream looked complete to the agent")
	}
	c := tr.sink.waitCalls(t, 1)[0]
	if c.OutputTokens < int64(len(openAISSEBody)/4) || c.InputTokens == 0 || !strings.Contains(c.Error, "estimated") {
		t.Fatalf("record %+v", c)
	}
	if tokens, _ := tr.relay.Spent("s1"); tokens == 0 {
		t.Fatal("an estimated call was not charged")
	}
}

// postStream sends the OpenAI streaming request as session one.
func postStream(t *testing.T, tr *testRelay) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, tr.url+"/openai/chat/completions", strings.NewReader(openAIStreamBody))
	req.Header.Set("Authorization", "Bearer "+tokenS1)
	resp, err := tr.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readStream sends the OpenAI streaming request and reads the answer to
// its end; it returns the error that ended the read (nil: a whole answer).
func readStream(t *testing.T, tr *testRelay) error {
	t.Helper()
	resp := postStream(t, tr)
	defer resp.Body.Close()
	_, err := io.ReadAll(resp.Body)
	return err
}

// TestStreamIdle: an upstream that stops sending mid-stream is cut after
// the idle timeout.
func TestStreamIdle(t *testing.T) {
	tr := startRelay(t, withConfig(func(c *Config) { c.StreamIdleTimeout = 100 * time.Millisecond }))
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, openAISSEBody)
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-time.After(10 * time.Second):
		}
	}
	start := time.Now()
	err := readStream(t, tr)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	c := tr.sink.waitCalls(t, 1)[0]
	if !strings.Contains(c.Error, "sent nothing") {
		t.Fatalf("record %+v", c)
	}
}

// TestAgentGoesAway: an agent that hangs up mid-stream cancels the
// upstream call, and the call is still recorded and charged (estimated),
// so hanging up before the usage report does not dodge the budget.
func TestAgentGoesAway(t *testing.T) {
	tr := startRelay(t)
	upstreamDone := make(chan struct{})
	tr.model.override = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		defer close(upstreamDone)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, openAISSEBody)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			t.Error("the upstream call was not cancelled when the agent went away")
		}
	}
	resp := postStream(t, tr)
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tr.srv.CloseClientConnections()
	<-upstreamDone
	c := tr.sink.waitCalls(t, 1)[0]
	if !strings.Contains(c.Error, "went away") || !strings.Contains(c.Error, "estimated") || c.OutputTokens == 0 {
		t.Fatalf("record %+v", c)
	}
	if tokens, _ := tr.relay.Spent("s1"); tokens == 0 {
		t.Fatal("not charged")
	}
}

// TestCompressedUpstream: a gzip-encoded upstream response is decoded by
// the relay's transport (which asked for it), metered, and passed on.
func TestCompressedUpstream(t *testing.T) {
	tr := startRelay(t)
	tr.model.override = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			writeSSE(w, anthropicSSE)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, anthropicJSON)
		_ = zw.Close()
	}
	resp, body := tr.do(t, http.MethodPost, "/anthropic/v1/messages", anthropicBody, map[string]string{"X-Api-Key": tokenS1, "Accept-Encoding": "br"})
	if resp.StatusCode != http.StatusOK || string(body) != anthropicJSON {
		t.Fatalf("status %d: %q", resp.StatusCode, body)
	}
	if c := tr.sink.waitCalls(t, 1)[0]; c.InputTokens != 10 || c.OutputTokens != 20 {
		t.Fatalf("record %+v", c)
	}
}
