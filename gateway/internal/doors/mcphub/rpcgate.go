package mcphub

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/strictjson"
)

// The JSON-RPC gate: every POST body to /mcp is read here, strictly, before
// mcp-go parses it. mcp-go reads JSON with encoding/json, which matches
// names case-insensitively (and folds 'ſ' to 's', 'K' to 'k') and lets a
// later duplicate win; the gateway would judge one tool call while mcp-go
// ran another (issue 24, item 1). The gate refuses:
//
//   - duplicate names at any depth, invalid UTF-8, data after the value, and
//     shapes past the limits (depth, members, elements, string length),
//     counted while the bytes are read, before any value is built (item 12);
//   - any envelope name but jsonrpc, id, method, params, result and error,
//     spelled exactly (so "Method" or "methoD" never reaches mcp-go);
//   - for tools/call, any params name but name, arguments and _meta;
//     for the other methods the hub serves, a params name that is not one
//     mcp-go reads but that encoding/json would read as one ("Cursor",
//     "protocolVerſion"; rpcParams). Other names there are extensions
//     clients may send, and mcp-go ignores them;
//   - batches (a JSON array), which the hub does not serve.
//
// With no duplicates and only exact names, encoding/json and the gate read
// the same message, so the arguments map the pipeline judges is the one
// the tool receives.

// Defaults of Config.JSONLimits (the shape of one request body to /mcp).
// Tool arguments are small objects: a path, a few flags, a list of edits.
// The bounds leave room for every built-in tool and refuse, in one pass
// over the bytes, the 300,000-key argument that cost 1.4 s of CPU and
// 123 MB before (issue 24 item 12).
const (
	DefaultJSONMaxDepth    = 32
	DefaultJSONMaxMembers  = 4096
	DefaultJSONMaxElements = 20000
)

// rpcEnvelope is a JSON-RPC 2.0 message as the gate reads it.
type rpcEnvelope struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsontext.Value `json:"id,omitzero"`
	Method  string         `json:"method,omitzero"`
	Params  jsontext.Value `json:"params,omitzero"`
	Result  jsontext.Value `json:"result,omitzero"`
	Error   jsontext.Value `json:"error,omitzero"`
}

// callParams are the params of tools/call the hub serves. (mcp-go also
// reads "task", "inputResponses" and "requestState"; the hub serves
// neither tasks nor multi round-trip calls, so they are refused.)
type callParams struct {
	Name      string         `json:"name"`
	Arguments jsontext.Value `json:"arguments,omitzero"`
	Meta      jsontext.Value `json:"_meta,omitzero"`
}

// rpcParams lists the params names mcp-go reads for the methods the hub
// serves besides tools/call. A method not listed has its params checked
// for shape and duplicates only (mcp-go answers "method not found" for
// most of them).
var rpcParams = map[string][]string{
	"initialize":                strings.Fields("protocolVersion capabilities clientInfo _meta"),
	"ping":                      {"_meta"},
	"tools/list":                {"cursor", "_meta"},
	"logging/setLevel":          {"level", "_meta"},
	"notifications/initialized": {"_meta"},
	"notifications/cancelled":   {"requestId", "reason", "_meta"},
	"notifications/progress":    strings.Fields("progressToken progress total message _meta"),
}

// gateError is a refusal of the gate: Code is the JSON-RPC error code,
// Msg short and safe for the agent, Reason a metric label.
type gateError struct {
	Code   int
	Msg    string
	Reason string
	ID     jsontext.Value // the request's id when it was read
}

func (e *gateError) Error() string { return e.Msg }

// Reasons of refused requests (metric label values).
const (
	refusedJSON   = "bad_json"
	refusedShape  = "shape"
	refusedNames  = "unknown_name"
	refusedBatch  = "batch"
	refusedParams = "bad_params"
	// Refusals of admission.go and of the session caps (auth.go).
	refusedBusy     = "busy"
	refusedSessions = "sessions_full"
)

// checkRPC reads body strictly (see above) and returns its method. Its
// error is nil when mcp-go may parse the body.
func checkRPC(body []byte, lim strictjson.Limits) (string, *gateError) {
	if isBatch(body) {
		return "", batchRefusal()
	}
	if err := strictjson.Check(body, lim); err != nil {
		return "", jsonRefusal(err)
	}
	return checkMessage(body)
}

func batchRefusal() *gateError {
	return &gateError{Code: -32600, Reason: refusedBatch, Msg: "JSON-RPC batches are not supported: send one request per HTTP request"}
}

// jsonRefusal is the gate's answer to a strictjson.Check refusal.
func jsonRefusal(err error) *gateError {
	reason := refusedJSON
	var se *strictjson.Error
	if errors.As(err, &se) && isShapeReason(se.Reason) {
		reason = refusedShape
	}
	return &gateError{Code: -32700, Reason: reason, Msg: "refused JSON-RPC request: " + safeRefusal(err)}
}

// checkMessage is checkRPC after the shape check (strictjson.Check or
// ReadChecked): the exact names of the envelope and of the params. body
// must have passed that check (so must its params, a part of it): the
// decodes do not check the shape again.
func checkMessage(body []byte) (string, *gateError) {
	if isBatch(body) {
		return "", batchRefusal()
	}
	var env rpcEnvelope
	if err := strictjson.DecodeChecked(body, &env); err != nil {
		return "", &gateError{Code: -32600, Reason: refusedNames, Msg: "refused JSON-RPC request: " + safeRefusal(err) +
			" (the message may hold only jsonrpc, id, method, params, result and error, spelled exactly)"}
	}
	if env.JSONRPC != "2.0" {
		return "", &gateError{Code: -32600, Reason: refusedNames, ID: env.ID, Msg: `refused JSON-RPC request: "jsonrpc" must be "2.0"`}
	}
	if len(env.Params) == 0 || env.Params.Kind() == 'n' {
		return env.Method, nil
	}
	if env.Method == "tools/call" {
		var p callParams
		if err := strictjson.DecodeChecked(env.Params, &p); err != nil {
			return "", &gateError{Code: -32602, Reason: refusedParams, ID: env.ID, Msg: "refused tools/call: " + safeRefusal(err) +
				" (params may hold only name, arguments and _meta, spelled exactly)"}
		}
		return env.Method, nil
	}
	names, ok := rpcParams[env.Method]
	if !ok {
		return env.Method, nil
	}
	if env.Params.Kind() != '{' {
		return "", &gateError{Code: -32602, Reason: refusedParams, ID: env.ID, Msg: fmt.Sprintf("refused %s: params must be an object", gate.CutText(env.Method, 64))}
	}
	if bad, ok := foldVariant(env.Params, names); ok {
		return "", &gateError{Code: -32602, Reason: refusedParams, ID: env.ID, Msg: fmt.Sprintf("refused %s: params name %q is a variant of one of %v (spell it exactly)", gate.CutText(env.Method, 64), gate.SafeName(bad), names)}
	}
	return env.Method, nil
}

// foldVariant returns the first top-level name of the object obj that is
// not in names but matches one of them the way encoding/json matches
// names (case-insensitively, 'K' as 'k', 'ſ' as 's': Unicode simple
// folding). obj has passed strictjson.Check.
func foldVariant(obj jsontext.Value, names []string) (string, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.ReadToken(); err != nil { // '{'
		return "", false
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", false
		}
		name := tok.String()
		if !slices.Contains(names, name) {
			for _, n := range names {
				if strings.EqualFold(n, name) {
					return name, true
				}
			}
		}
		if err := dec.SkipValue(); err != nil {
			return "", false
		}
	}
	return "", false
}

func isShapeReason(r string) bool {
	for _, s := range []string{"nested deeper", "object members", "array elements", "string is longer", "larger than"} {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}

// safeRefusal is a strictjson refusal fit for the agent: the path is a
// JSON pointer of names the agent sent, cut short.
func safeRefusal(err error) string {
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return "the body is not valid JSON"
	}
	if se.Path == "" {
		return se.Reason
	}
	return fmt.Sprintf("%s (at %s)", se.Reason, gate.SafeName(se.Path))
}
