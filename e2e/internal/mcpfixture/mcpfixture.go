// Package mcpfixture holds what the suite's own MCP servers and the tests
// that configure the gateway for them share: the tool definitions (the
// gateway pins them, so the test writes the pins from the same bytes the
// servers list), the evil server's report and the remote server's token
// header check.
package mcpfixture

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// Tool is one tool definition as a server lists it.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	// Args are the argument names (each annotated with the role "none").
	Args []string
}

// EvilTool is the one tool of e2e/cmd/evilserver.
var EvilTool = Tool{
	Name:        "attempt",
	Description: "Runs the confinement attempts again and reports each one's outcome.",
	Schema:      json.RawMessage(`{"type":"object","properties":{"what":{"type":"string","description":"all (default), or stdout-flood"}}}`),
	Args:        []string{"what"},
}

// RemoteTools are the tools of the streamable-HTTP MCP server of
// e2e/cmd/internet (host mcp.internet.test).
var RemoteTools = []Tool{
	{
		Name:        "echo",
		Description: "Echoes its text, prefixed with the server's name.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Args:        []string{"text"},
	},
	{
		Name:        "fail",
		Description: "Always fails with an error message.",
		Schema:      json.RawMessage(`{"type":"object","properties":{}}`),
	},
}

// RuntimeEchoTool is the one tool of the dependency-free Node and Python
// servers of images/servers/testdata (mcp-echo.js, mcp-echo.py), which the
// Debian variants of the server images run. They list it with these exact
// bytes: a difference hides the tool (its pin no longer matches).
var RuntimeEchoTool = Tool{
	Name:        "echo",
	Description: "Echoes its text, prefixed with the runtime that runs the server.",
	Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	Args:        []string{"text"},
}

// What values of EvilTool's argument.
const (
	WhatAll         = "all"
	WhatStdoutFlood = "stdout-flood"
)

// Report is the evil server's tool result (JSON text).
type Report struct {
	// Start are the attempts made when the server started; Call those of
	// this call.
	Start []Attempt `json:"start"`
	Call  []Attempt `json:"call"`
}

// Attempt is what happened to one attempt.
type Attempt struct {
	Kind   string `json:"kind"`   // environ, file, tcp, proxy-no-identity, proxy-blocked, proxy-secret, proxy-allowed, fork, memory
	Target string `json:"target"` // a path, an address or a URL
	// OK is true when the attempt did what it tried (read the file,
	// connected, got a 2xx, spawned every process, allocated it all).
	OK     bool   `json:"ok"`
	Result string `json:"result"` // the error, the status, or what was read (cut)
	// Count is the number of processes started (fork) or MiB allocated
	// (memory) before it stopped.
	Count int `json:"count,omitempty"`
}

// Env variables of the evil server (set in the launcher's configuration).
const (
	EnvFiles      = "EVIL_FILES"       // comma-separated paths to read
	EnvTCP        = "EVIL_TCP"         // comma-separated host:port to dial directly
	EnvBlockedURL = "EVIL_BLOCKED_URL" // a URL off its allowlist
	EnvSecretURL  = "EVIL_SECRET_URL"  // a URL on its allowlist carrying a secret
	EnvAllowedURL = "EVIL_ALLOWED_URL" // a URL on its allowlist (the control)
	EnvForkMax    = "EVIL_FORK_MAX"    // processes the fork bomb tries (default 10000)
	EnvMemoryMiB  = "EVIL_MEMORY_MIB"  // MiB the allocation tries (default 2048)
	EnvFloodMiB   = "EVIL_FLOOD_MIB"   // MiB written to stdout by stdout-flood (default 100)
)

// RemoteTokenHeader is checked by the remote server: Authorization must
// be "Bearer <E2E_MCP_TOKEN>".
const RemoteTokenHeader = "Authorization"

// Annotations returns the tool-annotations.json section of server with
// tools: every argument has the role "none", and each tool carries the pin
// of its definition (as `ironcurtain tools pin` would write it).
func Annotations(server string, tools []Tool) (map[string]any, error) {
	var out []map[string]any
	for _, t := range tools {
		schema, err := t.Listed()
		if err != nil {
			return nil, err
		}
		h, err := PinHash(t.Name, t.Description, schema)
		if err != nil {
			return nil, err
		}
		args := map[string][]string{}
		for _, a := range t.Args {
			args[a] = []string{"none"}
		}
		out = append(out, map[string]any{
			"toolName": t.Name, "serverName": server, "comment": t.Description,
			"args": args, "inputSchema": schema,
			"pin": map[string]string{"sha256": h, "description": t.Description},
		})
	}
	return map[string]any{"tools": out}, nil
}

// Listed is the input schema as the gateway reads it: the server lists
// the tool (mcp-go), the gateway's client decodes it into an mcp.Tool and
// encodes its InputSchema again (gateway/internal/servers/external).
func (t Tool) Listed() (json.RawMessage, error) {
	b, err := json.Marshal(mcp.NewToolWithRawSchema(t.Name, t.Description, t.Schema))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", t.Name, err)
	}
	var got mcp.Tool
	if err := json.Unmarshal(b, &got); err != nil {
		return nil, fmt.Errorf("listing %s: %w", t.Name, err)
	}
	out, err := json.Marshal(got.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", t.Name, err)
	}
	return out, nil
}

// PinHash is the gateway's pin hash of a tool definition (gateway/policy
// ToolDefinition.Hash, which this mirrors: a version tag, then name,
// description and the canonical schema, each preceded by its length). A
// drift shows as the tools staying hidden.
func PinHash(name, description string, schema json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("pinning %s: %w", name, err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("pinning %s: %w", name, err)
	}
	h := sha256.New()
	h.Write([]byte("ironcurtain tool pin v1\x00"))
	for _, part := range [][]byte{[]byte(name), []byte(description), canon} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
