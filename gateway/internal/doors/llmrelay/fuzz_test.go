package llmrelay

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Fuzzers for everything the relay parses. Run one at a time, e.g.
//
//	go test -run '^$' -fuzz FuzzSSEUsage -fuzztime 60s ./internal/doors/llmrelay/

// FuzzSSEUsage: the SSE usage extraction never panics, reports the same
// model, usage and events however the stream is cut into chunks, and
// never reports negative or unbounded counts.
func FuzzSSEUsage(f *testing.F) {
	f.Add([]byte(anthropicSSE), uint16(7))
	f.Add([]byte(openAISSEBody+openAISSEUsageChunk+openAISSEDone), uint16(100))
	f.Add([]byte("data: {\"usage\":{\"input_tokens\":-1,\"output_tokens\":1e30}}\r\n\r\n"), uint16(3))
	f.Add([]byte("event: message_delta\rdata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}\r\r"), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		whole := newMeter(true)
		var wholeEvents []sseEvent
		inner := whole.parser.onEvent
		whole.parser.onEvent = func(n, d []byte) { wholeEvents = append(wholeEvents, sseEvent{string(n), string(d)}); inner(n, d) }
		_, _ = whole.Write(data)

		cut := newMeter(true)
		var cutEvents []sseEvent
		inner2 := cut.parser.onEvent
		cut.parser.onEvent = func(n, d []byte) { cutEvents = append(cutEvents, sseEvent{string(n), string(d)}); inner2(n, d) }
		i := int(split) % (len(data) + 1)
		_, _ = cut.Write(data[:i])
		_, _ = cut.Write(data[i:])

		if whole.model != cut.model || whole.usage != cut.usage || whole.final != cut.final || len(wholeEvents) != len(cutEvents) {
			t.Fatalf("chunking changed the result: %+v vs %+v", whole.usage, cut.usage)
		}
		for k := range wholeEvents {
			if wholeEvents[k] != cutEvents[k] {
				t.Fatalf("event %d differs: %q vs %q", k, wholeEvents[k], cutEvents[k])
			}
		}
		for _, n := range []int64{whole.usage.Input, whole.usage.CacheWrite, whole.usage.CacheRead, whole.usage.Output} {
			if n < 0 || n > maxTokenCount {
				t.Fatalf("count %d out of range", n)
			}
		}
		if whole.final && !whole.seen {
			t.Fatal("final without usage")
		}
	})
}

// FuzzJSONScanner: for any valid JSON object the streaming scanner finds
// exactly the top-level "model" and "usage" values encoding/json finds,
// wherever the body is split; for anything else it does not panic.
func FuzzJSONScanner(f *testing.F) {
	f.Add([]byte(anthropicJSON), uint16(5))
	f.Add([]byte(openAIJSON), uint16(50))
	f.Add([]byte(`{"mod\u0065l":"m","x":{"usage":1},"usage":{"a":"}\""}}`), uint16(9))
	f.Add([]byte(`{"model":"a","model":"b","usage":null}`), uint16(0))
	f.Add([]byte(`{"usage" : 12 , "model":"\\"}`), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		var s jsonScanner
		i := int(split) % (len(data) + 1)
		s.feed(data[:i])
		s.feed(data[i:])
		var m map[string]json.RawMessage
		if !json.Valid(data) || json.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		for _, c := range []struct {
			key string
			got []byte
		}{{"model", s.model}, {"usage", s.usage}} {
			want, ok := m[c.key]
			if !ok {
				if c.got != nil {
					t.Fatalf("%s: found %s where encoding/json finds none", c.key, c.got)
				}
				continue
			}
			if len(want) >= maxCaptureBytes {
				continue
			}
			if !bytes.Equal(c.got, want) {
				t.Fatalf("%s: scanner %q, encoding/json %q", c.key, c.got, want)
			}
		}
	})
}

// FuzzParseRequestBody: request parsing never panics; an accepted body is
// valid JSON, and when the relay rewrote it only stream_options changed
// (include_usage set) while every other member kept its exact bytes.
func FuzzParseRequestBody(f *testing.F) {
	f.Add([]byte(openAIStreamBody), true)
	f.Add([]byte(`{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":[1]}}`), true)
	f.Add([]byte(`{"model":"m","MODEL":"n"}`), false)
	f.Add([]byte(`{"stream":true}  `), true)
	f.Add([]byte(`{"tools":[{"type":"function"},{"typ\u0065":"mcp","Type":"x"}],"mcp_servers":null}`), false)
	f.Add([]byte(`{"tools":[{"type":"web_fetch_20250910"}]}`), false)
	f.Fuzz(func(t *testing.T, data []byte, streamUsage bool) {
		info, err := parseRequestBody(data, streamUsage)
		if err != nil {
			return
		}
		if !json.Valid(info.body) {
			t.Fatalf("accepted body became invalid: %q", info.body)
		}
		if info.networkTool == "" {
			assertNoNetworkTool(t, data)
		}
		if !info.addedStreamUsage {
			if !bytes.Equal(info.body, data) {
				t.Fatal("body changed without a rewrite")
			}
			return
		}
		if !streamUsage || !info.stream {
			t.Fatal("rewrote a body that does not stream")
		}
		var before, after map[string]json.RawMessage
		if json.Unmarshal(data, &before) != nil || json.Unmarshal(info.body, &after) != nil {
			t.Fatal("not objects")
		}
		var opts struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if json.Unmarshal(after["stream_options"], &opts) != nil || opts.IncludeUsage == nil || !*opts.IncludeUsage {
			t.Fatalf("include_usage not set: %s", after["stream_options"])
		}
		delete(before, "stream_options")
		delete(after, "stream_options")
		if len(before) != len(after) {
			t.Fatal("members added or lost")
		}
		for k, v := range before {
			if !bytes.Equal(after[k], v) {
				t.Fatalf("member %q changed", k)
			}
		}
	})
}

// assertNoNetworkTool fails when encoding/json's reading of body (exact
// member names, as the providers read them) has a network tool the relay
// did not report.
func assertNoNetworkTool(t *testing.T, body []byte) {
	t.Helper()
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return
	}
	for _, k := range []string{"mcp_servers", "web_search_options"} {
		if v, ok := top[k]; ok && !isNull(v) && string(v) != "[]" {
			t.Fatalf("%s not reported", k)
		}
	}
	var tools []map[string]json.RawMessage
	if json.Unmarshal(top["tools"], &tools) != nil {
		return
	}
	for _, tool := range tools {
		var typ string
		if json.Unmarshal(tool["type"], &typ) == nil && isNetworkTool(typ) {
			t.Fatalf("tool type %q not reported", typ)
		}
	}
}
