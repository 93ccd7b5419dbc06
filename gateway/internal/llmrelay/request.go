package llmrelay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// maxModelNameLen bounds the model name kept in records and logs.
const maxModelNameLen = 200

// requestInfo is what the relay reads from a request body.
type requestInfo struct {
	model  string // the "model" member when it is a string
	stream bool   // "stream": true
	body   []byte // the body to send upstream
	// addedStreamUsage: the relay set stream_options.include_usage.
	addedStreamUsage bool
}

var errNotObject = errors.New("the request body must be one JSON object")

// streamUsageMember is appended to a streaming OpenAI request that has no
// stream_options, so the upstream reports usage in the stream's last chunk.
var streamUsageMember = []byte(`,"stream_options":{"include_usage":true}`)

// parseRequestBody reads model and stream from a JSON request body with
// exact, case-sensitive member names (encoding/json's struct decoding
// would also take "MODEL" and let a duplicate override what the upstream
// reads) and refuses duplicate top-level members. With streamUsage and
// "stream": true it makes sure stream_options.include_usage is true,
// leaving every other byte of the body as it was.
func parseRequestBody(b []byte, streamUsage bool) (requestInfo, error) {
	info := requestInfo{body: b}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return info, errNotObject
	}
	seen := make(map[string]struct{}, 8)
	optStart, optEnd := -1, -1
	var opts json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return info, fmt.Errorf("reading the request body: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return info, errNotObject
		}
		if _, dup := seen[key]; dup {
			return info, fmt.Errorf("the request body has the member %q twice", truncate(key, 40))
		}
		seen[key] = struct{}{}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return info, fmt.Errorf("reading the request body: %w", err)
		}
		switch key {
		case "model":
			var s string
			if json.Unmarshal(raw, &s) == nil {
				info.model = truncate(s, maxModelNameLen)
			}
		case "stream":
			info.stream = bytes.Equal(raw, []byte("true"))
		case "stream_options":
			optEnd = int(dec.InputOffset())
			optStart = optEnd - len(raw)
			opts = raw
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return info, errNotObject
	}
	end := int(dec.InputOffset())
	if _, err := dec.Token(); err != io.EOF {
		return info, errNotObject // trailing data after the object
	}
	if !streamUsage || !info.stream {
		return info, nil
	}
	if optStart < 0 {
		out := make([]byte, 0, len(b)+len(streamUsageMember))
		out = append(out, b[:end-1]...)
		out = append(out, streamUsageMember...)
		out = append(out, b[end-1:]...)
		info.body, info.addedStreamUsage = out, true
		return info, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(opts, &m) != nil || m == nil {
		return info, errors.New("stream_options must be a JSON object")
	}
	if bytes.Equal(m["include_usage"], []byte("true")) {
		return info, nil
	}
	m["include_usage"] = json.RawMessage("true")
	nv, err := json.Marshal(m)
	if err != nil {
		return info, fmt.Errorf("rewriting stream_options: %w", err)
	}
	if optStart < 0 || optEnd > len(b) || !bytes.Equal(b[optStart:optEnd], opts) {
		return info, errors.New("locating stream_options in the request body")
	}
	out := make([]byte, 0, len(b)+len(nv))
	out = append(out, b[:optStart]...)
	out = append(out, nv...)
	out = append(out, b[optEnd:]...)
	info.body, info.addedStreamUsage = out, true
	return info, nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
