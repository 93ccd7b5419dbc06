package llmrelay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
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
	// networkTool names a provider-side tool that reaches the network
	// (see networkToolIn), "" when there is none.
	networkTool string
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
		case "tools":
			t, err := networkToolIn(raw)
			if err != nil {
				return info, err
			}
			info.networkTool = cmp.Or(info.networkTool, t)
		case "mcp_servers", "web_search_options":
			if !isNull(raw) && !bytes.Equal(raw, []byte("[]")) {
				info.networkTool = cmp.Or(info.networkTool, key)
			}
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

// networkToolIn finds, in a "tools" array, a tool the provider runs itself
// and that reaches the network on the agent's behalf: Anthropic's
// web_search_* and web_fetch_* server tools, OpenAI's web_search* and
// remote "mcp" tools. Such a tool would fetch agent-chosen URLs (or put
// agent-chosen data in requests to them) around the egress proxy. Tool
// objects are read with exact member names and duplicate members are
// refused, so no spelling hides a type from the relay that the provider
// would honour.
func networkToolIn(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return "", errors.New("tools must be an array")
	}
	for _, t := range tools {
		members, err := objectMembers(t)
		if err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		var typ string
		if raw, ok := members["type"]; ok && json.Unmarshal(raw, &typ) != nil {
			return "", errors.New("tools: a tool type must be a string")
		}
		if isNetworkTool(typ) {
			return truncate(typ, 40), nil
		}
	}
	return "", nil
}

func isNetworkTool(typ string) bool {
	return typ == "mcp" || strings.HasPrefix(typ, "web_search") || strings.HasPrefix(typ, "web_fetch")
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(raw, []byte("null")) }

// objectMembers reads one JSON object's members with exact names,
// refusing duplicates.
func objectMembers(raw json.RawMessage) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("an element is not a JSON object")
	}
	out := make(map[string]json.RawMessage, 4)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("reading an object: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("an element is not a JSON object")
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("an object has the member %q twice", truncate(key, 40))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("reading an object: %w", err)
		}
		out[key] = v
	}
	return out, nil
}
