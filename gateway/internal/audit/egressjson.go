package audit

import (
	"encoding/json"
	"strconv"
)

// appendEgressJSON appends the JSON of e exactly as json.Marshal writes it
// (field order, omitempty, HTML escaping, the time as MarshalJSON), without
// reflection: the egress door records one row per tunnel, and the encoding
// was a tenth of a tunnel's CPU in the proxy. TestEgressJSONMatchesMarshal
// and FuzzEgressJSONMatchesMarshal hold it to json.Marshal's bytes.
func appendEgressJSON(dst []byte, e *EgressEvent) ([]byte, error) {
	dst = append(dst, `{"id":`...)
	dst = appendMarshalString(dst, e.ID)
	dst = append(dst, `,"session_id":`...)
	dst = appendMarshalString(dst, e.SessionID)
	if e.ToolCallID != "" {
		dst = append(dst, `,"tool_call_id":`...)
		dst = appendMarshalString(dst, e.ToolCallID)
	}
	dst = append(dst, `,"time":"`...)
	dst, err := e.Time.AppendText(dst) // MarshalJSON's text, quoted
	if err != nil {                    // a year outside 0-9999: json.Marshal's own error
		_, err = json.Marshal(e)
		return nil, err
	}
	dst = append(dst, `","kind":`...)
	dst = appendMarshalString(dst, e.Kind)
	if e.Method != "" {
		dst = append(dst, `,"method":`...)
		dst = appendMarshalString(dst, e.Method)
	}
	dst = append(dst, `,"host":`...)
	dst = appendMarshalString(dst, e.Host)
	dst = append(dst, `,"port":`...)
	dst = strconv.AppendInt(dst, int64(e.Port), 10)
	if e.ResolvedIP != "" {
		dst = append(dst, `,"resolved_ip":`...)
		dst = appendMarshalString(dst, e.ResolvedIP)
	}
	dst = append(dst, `,"decision":`...)
	dst = appendMarshalString(dst, e.Decision)
	dst = append(dst, `,"reason":`...)
	dst = appendMarshalString(dst, e.Reason)
	if e.Rule != "" {
		dst = append(dst, `,"rule":`...)
		dst = appendMarshalString(dst, e.Rule)
	}
	dst = append(dst, `,"bytes_up":`...)
	dst = strconv.AppendInt(dst, e.BytesUp, 10)
	dst = append(dst, `,"bytes_down":`...)
	dst = strconv.AppendInt(dst, e.BytesDown, 10)
	dst = append(dst, `,"duration_ns":`...)
	dst = strconv.AppendInt(dst, int64(e.Duration), 10)
	if e.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = appendMarshalString(dst, e.Error)
	}
	if e.TraceID != "" {
		dst = append(dst, `,"trace_id":`...)
		dst = appendMarshalString(dst, e.TraceID)
	}
	return append(dst, '}'), nil
}

// appendMarshalString appends s as json.Marshal writes a string: as it is
// when every byte is printable ASCII that needs no escape (HTML escaping
// on: not '<', '>' or '&'), else through json.Marshal itself.
func appendMarshalString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
