package audit

import (
	"encoding/json"
	"strconv"
	"sync"
)

// marshalEvent is json.Marshal(e), byte for byte, with the two records of
// every tool call (a decision and an outcome) encoded without reflection.
// A record the direct encoder cannot reproduce exactly (arguments that are
// not compact, HTML-safe JSON; a time json.Marshal refuses) goes through
// json.Marshal: TestAppendEventMatchesMarshal and FuzzAppendEventMatchesMarshal
// hold the two to the same bytes.
func marshalEvent(e Event) ([]byte, error) {
	return appendMarshal(make([]byte, 0, encodedSize(e)), e)
}

// appendMarshal is marshalEvent appending to b.
func appendMarshal(b []byte, e Event) ([]byte, error) {
	if ev, ok := e.(*EgressEvent); ok { // one row per tunnel
		return appendEgressJSON(b, ev)
	}
	if out, ok := appendEvent(b, e); ok {
		return out, nil
	}
	m, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return append(b, m...), nil
}

// encodeBufs holds the JSON-lines sink's encoding buffers between records.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf bounds a buffer kept in encodeBufs (a record with large
// arguments does not pin its buffer).
const maxPooledBuf = 64 << 10

// encodedSize is a close upper bound of the direct encoding's length when
// no string needs escapes: keys, time and numbers take under 320 bytes.
func encodedSize(e Event) int {
	switch x := e.(type) {
	case *ToolCallDecision:
		return 320 + len(x.CallID) + len(x.SessionID) + len(x.Server) + len(x.Tool) + len(x.Args) + len(x.Decision) +
			len(x.Rule) + len(x.Reason) + len(x.ShadowDecision) + len(x.ShadowRule) + len(x.EscalationID) +
			len(x.Detail) + len(x.PolicyVersion) + len(x.TraceID)
	case *ToolCallOutcome:
		return 200 + len(x.CallID) + len(x.SessionID) + len(x.Status) + len(x.Error)
	}
	return 0
}

// appendEvent appends the JSON of a *ToolCallDecision or *ToolCallOutcome
// to b as json.Marshal writes it; false (b unusable) for another event or
// a value it leaves to json.Marshal.
func appendEvent(b []byte, e Event) ([]byte, bool) {
	switch x := e.(type) {
	case *ToolCallDecision:
		if x == nil {
			return b, false
		}
		return appendDecision(b, x)
	case *ToolCallOutcome:
		if x == nil {
			return b, false
		}
		return appendOutcome(b, x)
	}
	return b, false
}

func appendDecision(b []byte, d *ToolCallDecision) ([]byte, bool) {
	t, err := d.Time.MarshalJSON()
	if err != nil {
		return b, false
	}
	b = append(b, `{"call_id":`...)
	b = appendString(b, d.CallID)
	b = append(b, `,"session_id":`...)
	b = appendString(b, d.SessionID)
	b = append(b, `,"time":`...)
	b = append(b, t...)
	b = append(b, `,"server":`...)
	b = appendString(b, d.Server)
	b = append(b, `,"tool":`...)
	b = appendString(b, d.Tool)
	b = append(b, `,"args":`...)
	if d.Args == nil {
		b = append(b, "null"...)
	} else {
		if !compactSafe(d.Args) {
			return b, false
		}
		b = append(b, d.Args...)
	}
	b = append(b, `,"decision":`...)
	b = appendString(b, d.Decision)
	b = append(b, `,"rule":`...)
	b = appendString(b, d.Rule)
	b = append(b, `,"reason":`...)
	b = appendString(b, d.Reason)
	b = appendOmitEmpty(b, `,"shadow_decision":`, d.ShadowDecision)
	b = appendOmitEmpty(b, `,"shadow_rule":`, d.ShadowRule)
	b = appendOmitEmpty(b, `,"escalation_id":`, d.EscalationID)
	b = appendOmitEmpty(b, `,"detail":`, d.Detail)
	b = appendOmitEmpty(b, `,"policy_version":`, d.PolicyVersion)
	b = appendOmitEmpty(b, `,"trace_id":`, d.TraceID)
	return append(b, '}'), true
}

func appendOutcome(b []byte, o *ToolCallOutcome) ([]byte, bool) {
	t, err := o.Time.MarshalJSON()
	if err != nil {
		return b, false
	}
	b = append(b, `{"call_id":`...)
	b = appendString(b, o.CallID)
	b = append(b, `,"session_id":`...)
	b = appendString(b, o.SessionID)
	b = append(b, `,"time":`...)
	b = append(b, t...)
	b = append(b, `,"status":`...)
	b = appendString(b, o.Status)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(o.Duration), 10)
	b = append(b, `,"result_bytes":`...)
	b = strconv.AppendInt(b, int64(o.ResultBytes), 10)
	if o.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = appendOmitEmpty(b, `,"error":`, o.Error)
	return append(b, '}'), true
}

func appendOmitEmpty(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// appendString appends s as a JSON string the way encoding/json does: a
// string of printable ASCII without '"', '\\', '<', '>' and '&' as it is,
// any other through json.Marshal (its escapes, U+FFFD for invalid UTF-8).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSON(s[i]) {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func plainJSON(c byte) bool {
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// compactSafe reports whether json.Marshal writes raw as it is: valid JSON
// with no whitespace outside strings, and no byte its compaction escapes
// ('<', '>', '&'; U+2028 and U+2029, which start with 0xE2, are ruled out
// with every other character that does).
func compactSafe(raw []byte) bool {
	in, esc := false, false
	for _, c := range raw {
		switch {
		case c == '<' || c == '>' || c == '&' || c == 0xE2:
			return false
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return json.Valid(raw)
}
