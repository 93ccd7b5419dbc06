package llmrelay

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type sseEvent struct{ Name, Data string }

func parseSSE(chunks ...string) []sseEvent {
	var out []sseEvent
	p := sseParser{onEvent: func(n, d []byte) { out = append(out, sseEvent{string(n), string(d)}) }}
	for _, c := range chunks {
		p.feed([]byte(c))
	}
	return out
}

func TestSSEParser(t *testing.T) {
	big := strings.Repeat("x", maxEventBytes+10)
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{name: "one event", in: "event: a\ndata: 1\n\n", want: []sseEvent{{"a", "1"}}},
		{name: "no space after colon", in: "event:a\ndata:1\n\n", want: []sseEvent{{"a", "1"}}},
		{name: "only one space stripped", in: "data:  1\n\n", want: []sseEvent{{"", " 1"}}},
		{name: "multi-line data", in: "data: a\ndata: b\n\n", want: []sseEvent{{"", "a\nb"}}},
		{name: "CRLF", in: "event: a\r\ndata: 1\r\n\r\n", want: []sseEvent{{"a", "1"}}},
		{name: "CR", in: "event: a\rdata: 1\r\r", want: []sseEvent{{"a", "1"}}},
		{name: "comment and unknown field", in: ": ping\nid: 7\nretry: 10\ndata: x\n\n", want: []sseEvent{{"", "x"}}},
		{name: "no data no event", in: "event: a\n\n", want: nil},
		{name: "event name reset", in: "event: a\ndata: 1\n\ndata: 2\n\n", want: []sseEvent{{"a", "1"}, {"", "2"}}},
		{name: "unterminated event is not dispatched", in: "data: 1\n", want: nil},
		{name: "field without colon", in: "data\n\n", want: []sseEvent{{"", ""}}},
		{name: "oversized event skipped, next kept", in: "data: " + big + "\n\ndata: ok\n\n", want: []sseEvent{{"", "ok"}}},
		{name: "oversized data lines skipped", in: "data: " + big[:maxEventBytes/2] + "\ndata: " + big[:maxEventBytes/2] + "\n\ndata: ok\n\n", want: []sseEvent{{"", "ok"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseSSE(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("whole: %q, want %q", got, tt.want)
			}
			if len(tt.in) > 200 {
				return
			}
			for i := 0; i <= len(tt.in); i++ {
				if got := parseSSE(tt.in[:i], tt.in[i:]); !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("split at %d: %q, want %q", i, got, tt.want)
				}
			}
			chunks := splitEvery(tt.in, 1)
			if got := parseSSE(chunks...); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("byte by byte: %q", got)
			}
		})
	}
}

func scanJSON(chunks ...string) (model, usage string) {
	var s jsonScanner
	for _, c := range chunks {
		s.feed([]byte(c))
	}
	return string(s.model), string(s.usage)
}

func TestJSONScanner(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantModel string
		wantUsage string
	}{
		{name: "anthropic", in: anthropicJSON, wantModel: `"claude-haiku-4-5-20251001"`, wantUsage: `{"input_tokens":10,"output_tokens":20}`},
		{name: "openai", in: openAIJSON, wantModel: `"gpt-4o-mini-2024-07-18"`, wantUsage: `{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}`},
		{name: "whitespace", in: "{ \"model\" : \"m\" ,\n \"usage\" :\t{ \"a\" : [1, {\"b\":\"}\"}] } }", wantModel: `"m"`, wantUsage: `{ "a" : [1, {"b":"}"}] }`},
		{name: "nested usage ignored", in: `{"choices":[{"usage":{"x":1},"model":"inner"}],"model":"outer"}`, wantModel: `"outer"`},
		{name: "keys inside strings", in: `{"text":"\"model\":\"fake\",\"usage\":{}","model":"real"}`, wantModel: `"real"`},
		{name: "escaped key", in: `{"mod\u0065l":"m","us\u0061ge":{"input_tokens":1}}`, wantModel: `"m"`, wantUsage: `{"input_tokens":1}`},
		{name: "escaped quote in value", in: `{"model":"a\"b"}`, wantModel: `"a\"b"`},
		{name: "backslash at end of value", in: `{"model":"a\\","usage":null}`, wantModel: `"a\\"`, wantUsage: `null`},
		{name: "scalar usage", in: `{"usage":5,"model":"m"}`, wantModel: `"m"`, wantUsage: `5`},
		{name: "scalar before close", in: `{"usage":true}`, wantUsage: `true`},
		{name: "duplicate key last wins", in: `{"model":"a","model":"b"}`, wantModel: `"b"`},
		{name: "not an object", in: `["model","x"]`},
		{name: "garbage", in: `}}}{{{"model"`},
		{name: "trailing data ignored", in: `{"model":"a"}{"model":"b"}`, wantModel: `"a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i <= len(tt.in); i++ {
				m, u := scanJSON(tt.in[:i], tt.in[i:])
				if m != tt.wantModel || u != tt.wantUsage {
					t.Fatalf("split at %d: model %s usage %s", i, m, u)
				}
			}
		})
	}
}

func TestHasUsage(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{in: `{"usage":null}`, want: false},
		{in: `{"usage" : null}`, want: false},
		{in: `{"usage":{"a":1}}`, want: true},
		{in: `{"usage":null,"x":{"usage":{}}}`, want: true},
		{in: `{"text":"\"usage\":{}"}`, want: false},
		{in: `{"usage"`, want: false},
		{in: `{}`, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := hasUsage([]byte(tt.in)); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

// TestMeter: usage and model from whole bodies in every chunking.
func TestMeter(t *testing.T) {
	tests := []struct {
		name      string
		sse       bool
		in        string
		wantModel string
		want      Usage
		wantFinal bool
	}{
		{name: "anthropic sse", sse: true, in: anthropicSSE, wantModel: "claude-sonnet-4-5-20250929",
			want: Usage{Input: 1200, CacheWrite: 100, CacheRead: 1000, Output: 350}, wantFinal: true},
		{name: "anthropic sse cut after start", sse: true, in: anthropicSSE[:strings.Index(anthropicSSE, "event: content_block_start")], wantModel: "claude-sonnet-4-5-20250929",
			want: Usage{Input: 1200, CacheWrite: 100, CacheRead: 1000, Output: 1}},
		{name: "openai sse", sse: true, in: openAISSEBody + openAISSEUsageChunk + openAISSEDone, wantModel: "gpt-4o-2024-08-06",
			want: Usage{Input: 500, Output: 40}, wantFinal: true},
		{name: "openai sse without usage", sse: true, in: openAISSEBody + openAISSEDone, wantModel: "gpt-4o-2024-08-06"},
		{name: "responses api sse", sse: true,
			in: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-5\",\"usage\":null}}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\\\"usage\\\":{\\\"output_tokens\\\":9}\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-5\",\"usage\":{\"input_tokens\":11,\"output_tokens\":22,\"total_tokens\":33}}}\n\n",
			wantModel: "gpt-5", want: Usage{Input: 11, Output: 22}, wantFinal: true},
		{name: "vllm continuous usage", sse: true,
			in:        "data: {\"model\":\"m\",\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\ndata: {\"model\":\"m\",\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
			wantModel: "m", want: Usage{Input: 5, Output: 2}, wantFinal: true},
		{name: "negative and huge counts clamped", sse: false, in: `{"model":"m","usage":{"input_tokens":-5,"output_tokens":99999999999999999}}`,
			wantModel: "m", want: Usage{Output: maxTokenCount}, wantFinal: true},
		{name: "anthropic json", in: anthropicJSON, wantModel: "claude-haiku-4-5-20251001", want: Usage{Input: 10, Output: 20}, wantFinal: true},
		{name: "embeddings json", in: `{"object":"list","data":[{"embedding":[0.1]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`,
			wantModel: "text-embedding-3-small", want: Usage{Input: 8}, wantFinal: true},
		{name: "json usage not an object", in: `{"model":"m","usage":"lots"}`, wantModel: "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{1, 3, 17, 64, len(tt.in) + 1} {
				m := newMeter(tt.sse)
				for _, c := range splitEvery(tt.in, size) {
					_, _ = m.Write([]byte(c))
				}
				m.finish()
				if m.model != tt.wantModel || m.usage != tt.want || m.final != tt.wantFinal || m.bytes != int64(len(tt.in)) {
					t.Fatalf("chunks of %d: model %q usage %+v final %v", size, m.model, m.usage, m.final)
				}
			}
		})
	}
}

func TestParseRequestBody(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		streamUsage bool
		wantModel   string
		wantStream  bool
		wantBody    string // "" means unchanged
		wantErr     string
	}{
		{name: "plain", in: `{"model":"m","max_tokens":5}`, wantModel: "m"},
		{name: "stream not rewritten for anthropic", in: `{"model":"m","stream":true}`, wantModel: "m", wantStream: true},
		{name: "stream usage added", in: `{"model":"m","stream":true}`, streamUsage: true, wantModel: "m", wantStream: true,
			wantBody: `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{name: "stream usage added before trailing space", in: "{\"stream\":true }\n", streamUsage: true, wantStream: true,
			wantBody: "{\"stream\":true ,\"stream_options\":{\"include_usage\":true}}\n"},
		{name: "other stream options kept", in: `{"stream":true,"stream_options":{"x":1}}`, streamUsage: true, wantStream: true,
			wantBody: `{"stream":true,"stream_options":{"include_usage":true,"x":1}}`},
		{name: "stream options not an object", in: `{"stream":true,"stream_options":[1]}`, streamUsage: true, wantErr: "stream_options"},
		{name: "stream options null", in: `{"stream":true,"stream_options":null}`, streamUsage: true, wantErr: "stream_options"},
		{name: "stream as string is not streaming", in: `{"stream":"true"}`, streamUsage: true},
		{name: "case variant not read", in: `{"MODEL":"a","Model":"b","model":"c"}`, wantModel: "c"},
		{name: "model not a string", in: `{"model":5}`},
		{name: "duplicate", in: `{"stream":false,"stream":true}`, streamUsage: true, wantErr: "twice"},
		{name: "duplicate escaped", in: `{"model":"a","mod\u0065l":"b"}`, wantErr: "twice"},
		{name: "array", in: `[1]`, wantErr: "one JSON object"},
		{name: "trailing", in: `{} {}`, wantErr: "one JSON object"},
		{name: "truncated", in: `{"model":"m"`, wantErr: "request body"},
		{name: "long model cut", in: `{"model":"` + strings.Repeat("é", 300) + `"}`, wantModel: strings.Repeat("é", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := parseRequestBody([]byte(tt.in), tt.streamUsage)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.wantBody
			if want == "" {
				want = tt.in
			}
			if info.model != tt.wantModel || info.stream != tt.wantStream || string(info.body) != want {
				t.Fatalf("model %q stream %v body %s", info.model, info.stream, info.body)
			}
			if !json.Valid(info.body) {
				t.Fatalf("invalid body %s", info.body)
			}
		})
	}
}

func TestValidModelID(t *testing.T) {
	for _, id := range []string{"gpt-4o", "ft:gpt-4o:org::abc", "llama3.1:8b", "Qwen_2.5-7B"} {
		if !validModelID(id) {
			t.Errorf("%q refused", id)
		}
	}
	for _, id := range []string{"", ".", "..", ".hidden", "a/b", "a\\b", "a b", "a%2e", "a\x00", strings.Repeat("a", maxModelIDLen+1), "a@b", "a?b", "a#b"} {
		if validModelID(id) {
			t.Errorf("%q accepted", id)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4} {
		s := truncate("éé", n)
		if len(s) > n || !strings.HasPrefix("éé", s) || !json.Valid([]byte(fmt.Sprintf("%q", s))) {
			t.Fatalf("truncate to %d: %q", n, s)
		}
	}
}
