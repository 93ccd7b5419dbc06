package llmrelay

import (
	"bytes"
	"encoding/json"
)

// maxTokenCount caps any token count read from an upstream, so sums cannot
// overflow whatever a broken upstream reports.
const maxTokenCount = 1 << 40

// Usage is the token usage of one call. Input excludes the cache counts
// (Anthropic reports them apart; OpenAI's prompt_tokens is all Input).
type Usage struct {
	Input      int64
	CacheWrite int64
	CacheRead  int64
	Output     int64
}

// InputTotal is every input token, cached or not.
func (u Usage) InputTotal() int64 { return u.Input + u.CacheWrite + u.CacheRead }

// Total is what budgets count: all input and output tokens.
func (u Usage) Total() int64 { return u.InputTotal() + u.Output }

// wireUsage reads the usage objects of both wire formats: Anthropic
// (input_tokens, output_tokens, cache_*_input_tokens), OpenAI chat and
// embeddings (prompt_tokens, completion_tokens) and the OpenAI Responses API
// (input_tokens, output_tokens).
type wireUsage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheCreation    int64 `json:"cache_creation_input_tokens"`
	CacheRead        int64 `json:"cache_read_input_tokens"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

func clampTokens(n int64) int64 {
	return min(max(n, 0), maxTokenCount)
}

func (w *wireUsage) usage() Usage {
	return Usage{
		Input:      clampTokens(max(w.InputTokens, w.PromptTokens)),
		CacheWrite: clampTokens(w.CacheCreation),
		CacheRead:  clampTokens(w.CacheRead),
		Output:     clampTokens(max(w.OutputTokens, w.CompletionTokens)),
	}
}

// merge keeps the largest count of each kind: the streamed counts are
// cumulative (Anthropic message_delta, vLLM continuous usage).
func (u *Usage) merge(o Usage) {
	u.Input = max(u.Input, o.Input)
	u.CacheWrite = max(u.CacheWrite, o.CacheWrite)
	u.CacheRead = max(u.CacheRead, o.CacheRead)
	u.Output = max(u.Output, o.Output)
}

// modelUsage is an object that carries a model and a usage: the top level
// of a response or stream chunk, Anthropic's message_start "message" and
// the Responses API's "response".
type modelUsage struct {
	Model string     `json:"model"`
	Usage *wireUsage `json:"usage"`
}

// sseChunk is the part of an SSE event's data the meter reads.
type sseChunk struct {
	Type string `json:"type"`
	modelUsage
	Message  *modelUsage `json:"message"`
	Response *modelUsage `json:"response"`
}

// meter reads model and usage from a response body as it streams through.
type meter struct {
	sse    bool
	parser sseParser
	js     jsonScanner

	model string
	usage Usage
	// final: the upstream sent its closing usage report (the whole body's
	// usage, message_delta, the stream's usage chunk, response.completed).
	final bool
	seen  bool // any usage at all
	bytes int64
}

func newMeter(sse bool) *meter {
	m := &meter{sse: sse}
	if sse {
		m.parser.onEvent = m.onEvent
	}
	return m
}

// Write feeds a chunk of the response body; it never fails and never
// retains p.
func (m *meter) Write(p []byte) (int, error) {
	m.bytes += int64(len(p))
	if m.sse {
		m.parser.feed(p)
	} else {
		m.js.feed(p)
	}
	return len(p), nil
}

// finish reads what the JSON scanner captured; call once the body ended.
func (m *meter) finish() {
	if m.sse {
		return
	}
	if len(m.js.model) > 0 {
		var s string
		if json.Unmarshal(m.js.model, &s) == nil {
			m.model = s
		}
	}
	if len(m.js.usage) > 0 {
		var w wireUsage
		if json.Unmarshal(m.js.usage, &w) == nil {
			m.usage.merge(w.usage())
			m.final, m.seen = true, true
		}
	}
}

var usageKey = []byte(`"usage"`)

// hasUsage reports whether data has a "usage" key whose value is not null,
// without decoding it: most stream chunks carry none or "usage":null.
func hasUsage(data []byte) bool {
	for off := 0; off < len(data); {
		i := bytes.Index(data[off:], usageKey)
		if i < 0 {
			return false
		}
		j := off + i + len(usageKey)
		for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r' || data[j] == ':') {
			j++
		}
		if j < len(data) && data[j] != 'n' {
			return true
		}
		off = j
	}
	return false
}

func (m *meter) onEvent(_, data []byte) {
	if !hasUsage(data) && (m.model != "" || !bytes.Contains(data, []byte(`"model"`))) {
		return
	}
	var c sseChunk
	if json.Unmarshal(data, &c) != nil {
		return
	}
	for _, mu := range []*modelUsage{&c.modelUsage, c.Message, c.Response} {
		if mu == nil {
			continue
		}
		if m.model == "" && mu.Model != "" {
			m.model = mu.Model
		}
		if mu.Usage != nil {
			m.usage.merge(mu.Usage.usage())
			m.seen = true
			if c.Type != "message_start" {
				m.final = true
			}
		}
	}
}
