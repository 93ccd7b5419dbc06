package llmrelay

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// A relayed call has one span with the token counts of its audit record;
// its attributes are exactly the listed ones (no prompt, no answer, no
// key), and the agent's traceparent does not make it a child of the
// agent's trace.
func TestTraceRelayCall(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		body     string
		stream   string
	}{
		{name: "anthropic json", provider: llmprovider.Anthropic, body: anthropicBody, stream: "false"},
		{name: "openai sse", provider: llmprovider.OpenAI, body: openAIStreamBody, stream: "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			tr := startRelay(t, func(_ *Config, d *Deps) { d.Tracer = tp.Tracer(tracerScope) })
			const agentTrace = "0af7651916cd43dd8448eb211c80319c"
			hdr := map[string]string{"Content-Type": "application/json", "Traceparent": "00-" + agentTrace + "-b7ad6b7169203331-01"}
			path := "/openai/chat/completions"
			hdr["Authorization"] = "Bearer " + tokenS1
			if tt.provider == llmprovider.Anthropic {
				path = "/anthropic/v1/messages"
				delete(hdr, "Authorization")
				hdr["X-Api-Key"], hdr["Anthropic-Version"] = tokenS1, "2023-06-01"
			}
			resp, body := tr.do(t, http.MethodPost, path, tt.body, hdr)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			rec := tr.sink.waitCalls(t, 1)[0]
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			s := spans[0]
			if s.Name != spanCall || s.Parent.IsValid() || s.SpanContext.TraceID().String() == agentTrace {
				t.Fatalf("span %s parent %v trace %s: the agent's trace context was used", s.Name, s.Parent, s.SpanContext.TraceID())
			}
			if rec.TraceID != s.SpanContext.TraceID().String() {
				t.Fatalf("record trace id %q, span %s", rec.TraceID, s.SpanContext.TraceID())
			}
			got := map[string]string{}
			var keys []string
			for _, a := range s.Attributes {
				got[string(a.Key)] = a.Value.Emit()
				keys = append(keys, string(a.Key))
			}
			sort.Strings(keys)
			wantKeys := "gen_ai.request.model,gen_ai.system,gen_ai.usage.input_tokens,gen_ai.usage.output_tokens,http.response.status_code,ironcurtain.call_id,ironcurtain.session_id,ironcurtain.stream"
			if strings.Join(keys, ",") != wantKeys {
				t.Fatalf("attribute keys %v, want %s", keys, wantKeys)
			}
			want := map[string]string{
				"gen_ai.system": tt.provider, "gen_ai.request.model": rec.Model, "ironcurtain.session_id": "s1",
				"gen_ai.usage.input_tokens": strconv.FormatInt(rec.InputTokens, 10), "gen_ai.usage.output_tokens": strconv.FormatInt(rec.OutputTokens, 10),
				"http.response.status_code": "200", "ironcurtain.stream": tt.stream, "ironcurtain.call_id": rec.ID,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if rec.InputTokens == 0 || rec.OutputTokens == 0 {
				t.Fatalf("record without tokens: %+v", rec)
			}
		})
	}
}
