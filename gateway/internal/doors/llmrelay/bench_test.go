package llmrelay

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// Benchmarks on loopback (bounded runs):
//
//	go test -run '^$' -bench 'RelayOverhead' -benchtime 2000x ./internal/doors/llmrelay/
//
// BenchmarkRelayOverhead sends each iteration's call straight to the fake
// model server AND through the relay (alternating which goes first, so
// both see the same load on this shared machine) and reports the median
// latency of each and the median added by the relay (relay − direct per
// pair). The audit sink is in memory: the figure is the relay's own
// overhead, not the audit store's commit latency.

// benchPrompt is a realistic request: about 2 KB of conversation.
var benchPrompt = strings.Repeat("Summarise the following paragraph in one sentence. ", 40)

func benchBodies() (anthropicJSONReq, anthropicSSEReq, openAIJSONReq, openAISSEReq string) {
	msg := `"messages":[{"role":"user","content":"` + benchPrompt + `"}]`
	return `{"model":"claude-haiku-4-5","max_tokens":256,` + msg + `}`,
		`{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true,` + msg + `}`,
		`{"model":"gpt-4o-mini",` + msg + `}`,
		`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},` + msg + `}`
}

type benchCase struct {
	name     string
	path     string // after /llm/<provider> and after the upstream base
	provider string
	body     string
}

func benchCases() []benchCase {
	aj, as, oj, os := benchBodies()
	return []benchCase{
		{name: "anthropic-json", provider: llmprovider.Anthropic, path: "/v1/messages", body: aj},
		{name: "anthropic-sse", provider: llmprovider.Anthropic, path: "/v1/messages", body: as},
		{name: "openai-json", provider: llmprovider.OpenAI, path: "/chat/completions", body: oj},
		{name: "openai-sse", provider: llmprovider.OpenAI, path: "/chat/completions", body: os},
	}
}

// timedCall sends one request and reads the whole response.
func timedCall(b *testing.B, c *http.Client, url, body string, hdr http.Header) time.Duration {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header = hdr
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK || n == 0 {
		b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, n, err)
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkRelayOverhead(b *testing.B) {
	tr := startRelay(b, withConfig(func(c *Config) {
		c.Budget = Budget{MaxTokens: 1 << 50, MaxCostUSD: 1e12}
		c.MaxConcurrentPerSession = 64
	}))
	tr.model.discard = true
	direct := tr.model.srv.Client()
	relayed := tr.srv.Client()
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			directURL, relayURL := tr.model.srv.URL+bc.path, tr.url+"/anthropic"+bc.path
			directHdr := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {anthropicKey}, "Anthropic-Version": {"2023-06-01"}}
			relayHdr := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {tokenS1}, "Anthropic-Version": {"2023-06-01"}}
			if bc.provider == llmprovider.OpenAI {
				directURL, relayURL = tr.model.srv.URL+"/v1"+bc.path, tr.url+"/openai"+bc.path
				directHdr = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + openAIKey}}
				relayHdr = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + tokenS1}}
			}
			// Warm both paths' connections.
			timedCall(b, direct, directURL, bc.body, directHdr.Clone())
			timedCall(b, relayed, relayURL, bc.body, relayHdr.Clone())
			dts, rts, diffs := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var dt, rt time.Duration
				if i%2 == 0 {
					dt = timedCall(b, direct, directURL, bc.body, directHdr.Clone())
					rt = timedCall(b, relayed, relayURL, bc.body, relayHdr.Clone())
				} else {
					rt = timedCall(b, relayed, relayURL, bc.body, relayHdr.Clone())
					dt = timedCall(b, direct, directURL, bc.body, directHdr.Clone())
				}
				dts, rts, diffs = append(dts, dt), append(rts, rt), append(diffs, rt-dt)
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(median(dts)), "direct-ms/median")
			b.ReportMetric(ms(median(rts)), "relay-ms/median")
			b.ReportMetric(ms(median(diffs)), "overhead-ms/median")
		})
	}
}

// BenchmarkRelay: calls through the relay alone (allocations of the whole
// path: agent client, relay, fake server).
func BenchmarkRelay(b *testing.B) {
	tr := startRelay(b, withConfig(func(c *Config) { c.MaxConcurrentPerSession = 64 }))
	tr.model.discard = true
	c := tr.srv.Client()
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			url := tr.url + "/" + bc.provider + bc.path
			hdr := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {tokenS1}}
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for i := 0; i < b.N; i++ {
				timedCall(b, c, url, bc.body, hdr.Clone())
			}
		})
	}
}

// BenchmarkMeter: usage extraction alone, per response body.
func BenchmarkMeter(b *testing.B) {
	bodies := []struct {
		name string
		sse  bool
		body string
	}{
		{name: "anthropic-sse", sse: true, body: anthropicSSE},
		{name: "openai-sse", sse: true, body: openAISSEBody + openAISSEUsageChunk + openAISSEDone},
		{name: "anthropic-json", body: anthropicJSON},
		{name: "openai-json", body: openAIJSON},
	}
	for _, bb := range bodies {
		b.Run(bb.name, func(b *testing.B) {
			data := []byte(bb.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				m := newMeter(bb.sse)
				_, _ = m.Write(data)
				m.finish()
				if !m.final {
					b.Fatal("no usage")
				}
			}
		})
	}
}

// BenchmarkParseRequestBody: reading model/stream and adding
// stream_options to a 2 KB request.
func BenchmarkParseRequestBody(b *testing.B) {
	_, _, oj, _ := benchBodies()
	streaming := strings.Replace(oj, `"model":"gpt-4o-mini",`, `"model":"gpt-4o-mini","stream":true,`, 1)
	for _, c := range []struct {
		name string
		body string
	}{{"plain", oj}, {"stream-usage-added", streaming}} {
		b.Run(c.name, func(b *testing.B) {
			data := []byte(c.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := parseRequestBody(data, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
