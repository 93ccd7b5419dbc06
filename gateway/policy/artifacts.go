package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// File names of the artifacts in a policy directory.
const (
	CompiledPolicyFile = "compiled-policy.json"
	AnnotationsFile    = "tool-annotations.json"
	DynamicListsFile   = "dynamic-lists.json"
)

// CompiledPolicy is compiled-policy.json (the original's CompiledPolicyFile;
// ServerName is set only in the per-server variant).
type CompiledPolicy struct {
	GeneratedAt      string `json:"generatedAt,omitempty"`
	ServerName       string `json:"serverName,omitempty"`
	ConstitutionHash string `json:"constitutionHash,omitempty"`
	InputHash        string `json:"inputHash,omitempty"`
	// Sandbox is the sandbox the rules were compiled for (an extension of
	// the original's format, which ignores unknown top-level keys; absent
	// in the original's artifacts). LoadDir rebases rules that name it to
	// the configured sandbox; absent means DefaultCompiledSandbox.
	Sandbox         string           `json:"sandbox,omitempty"`
	Rules           []CompiledRule   `json:"rules"`
	ListDefinitions []ListDefinition `json:"listDefinitions,omitempty"`
	SkippedServers  []SkippedServer  `json:"skippedServers,omitempty"`
}

// CompiledRule is one ordered rule. Then is the decision when If holds.
type CompiledRule struct {
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	Principle   string        `json:"principle,omitempty"`
	If          RuleCondition `json:"if"`
	Then        Status        `json:"then"`
	Reason      string        `json:"reason"`
}

// RuleCondition is a rule's "if": every present field must hold; an empty
// condition matches every call. Present lists are never empty (load rejects
// an empty list, which the original treats as "never matches").
type RuleCondition struct {
	Roles   []Role           `json:"roles,omitempty"`
	Server  []string         `json:"server,omitempty"`
	Tool    []string         `json:"tool,omitempty"`
	Paths   *PathCondition   `json:"paths,omitempty"`
	Domains *DomainCondition `json:"domains,omitempty"`
	Lists   []ListCondition  `json:"lists,omitempty"`
}

// PathCondition holds when every extracted path is within Within (an
// absolute path or one starting with ~).
type PathCondition struct {
	Roles  []Role `json:"roles"`
	Within string `json:"within"`
}

// DomainCondition holds when every extracted URL's domain matches Allowed:
// "host", "*.suffix", "*" (never an IP), "host/owner/repo" or "@list".
type DomainCondition struct {
	Roles   []Role   `json:"roles"`
	Allowed []string `json:"allowed"`
}

// Match types of a ListCondition.
const (
	MatchDomains     = "domains"
	MatchEmails      = "emails"
	MatchIdentifiers = "identifiers"
)

// ListCondition holds when every extracted value matches an Allowed entry.
type ListCondition struct {
	Roles     []Role   `json:"roles"`
	Allowed   []string `json:"allowed"`
	MatchType string   `json:"matchType"`
}

// ListDefinition is metadata about a dynamic list; the engine ignores it.
type ListDefinition struct {
	Name             string `json:"name"`
	Type             string `json:"type"`
	Principle        string `json:"principle,omitempty"`
	GenerationPrompt string `json:"generationPrompt,omitempty"`
	RequiresMcp      bool   `json:"requiresMcp"`
	McpServerHint    string `json:"mcpServerHint,omitempty"`
}

// SkippedServer is metadata; the engine ignores it.
type SkippedServer struct {
	ServerName string `json:"serverName"`
	Reason     string `json:"reason"`
}

// DynamicLists is dynamic-lists.json.
type DynamicLists struct {
	GeneratedAt string                  `json:"generatedAt,omitempty"`
	Lists       map[string]ResolvedList `json:"lists"`
}

// ResolvedList is one named list.
type ResolvedList struct {
	Values          []string `json:"values"`
	ManualAdditions []string `json:"manualAdditions"`
	ManualRemovals  []string `json:"manualRemovals"`
	ResolvedAt      string   `json:"resolvedAt,omitempty"`
	InputHash       string   `json:"inputHash,omitempty"`
}

// Effective returns the de-duplicated union of Values and ManualAdditions
// (values first, in order) minus ManualRemovals.
func (l ResolvedList) Effective() []string {
	removed := make(map[string]bool, len(l.ManualRemovals))
	for _, v := range l.ManualRemovals {
		removed[v] = true
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(l.Values)+len(l.ManualAdditions))
	for _, src := range [][]string{l.Values, l.ManualAdditions} {
		for _, v := range src {
			if seen[v] || removed[v] {
				continue
			}
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// ParseCompiledPolicy decodes compiled-policy.json. Unknown keys inside a
// rule's "if" are an error (a condition the engine does not understand must
// not be silently dropped); other unknown keys are metadata and ignored.
func ParseCompiledPolicy(file string, b []byte) (*CompiledPolicy, error) {
	var raw struct {
		GeneratedAt      string            `json:"generatedAt"`
		ServerName       string            `json:"serverName"`
		ConstitutionHash string            `json:"constitutionHash"`
		InputHash        string            `json:"inputHash"`
		Sandbox          string            `json:"sandbox"`
		Rules            []json.RawMessage `json:"rules"`
		ListDefinitions  []ListDefinition  `json:"listDefinitions"`
		SkippedServers   []SkippedServer   `json:"skippedServers"`
	}
	if err := decodeExact(b, &raw); err != nil {
		return nil, fileErr(file, "", jsonErr(b, err))
	}
	if raw.Rules == nil {
		return nil, fileErr(file, "rules", errors.New("missing"))
	}
	p := &CompiledPolicy{GeneratedAt: raw.GeneratedAt, ServerName: raw.ServerName, ConstitutionHash: raw.ConstitutionHash,
		InputHash: raw.InputHash, Sandbox: raw.Sandbox, ListDefinitions: raw.ListDefinitions, SkippedServers: raw.SkippedServers}
	for i, rr := range raw.Rules {
		r, err := parseRule(rr)
		if err != nil {
			return nil, fileErr(file, fmt.Sprintf("rules[%d]%s", i, err.path), err.err)
		}
		p.Rules = append(p.Rules, r)
	}
	if err := checkArtifact(file, b); err != nil {
		return nil, err
	}
	return p, nil
}

type pathError struct {
	path string
	err  error
}

func parseRule(b []byte) (CompiledRule, *pathError) {
	var raw map[string]json.RawMessage
	if err := decodeExact(b, &raw); err != nil {
		return CompiledRule{}, &pathError{err: err}
	}
	var r CompiledRule
	for _, f := range []struct {
		key string
		dst *string
		req bool
	}{{"name", &r.Name, true}, {"description", &r.Description, false}, {"principle", &r.Principle, false}, {"reason", &r.Reason, false}} {
		v, ok := raw[f.key]
		if !ok {
			if f.req {
				return r, &pathError{path: "." + f.key, err: errors.New("missing")}
			}
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return r, &pathError{path: "." + f.key, err: errors.New("must be a string")}
		}
	}
	then, ok := raw["then"]
	if !ok {
		return r, &pathError{path: ".then", err: errors.New("missing")}
	}
	var ts string
	if err := json.Unmarshal(then, &ts); err != nil {
		return r, &pathError{path: ".then", err: errors.New("must be a string")}
	}
	st, err := ParseStatus(ts)
	if err != nil {
		return r, &pathError{path: ".then", err: err}
	}
	r.Then = st
	cond, ok := raw["if"]
	if !ok {
		return r, &pathError{path: ".if", err: errors.New("missing")}
	}
	if err := strictUnmarshal(cond, &r.If); err != nil {
		return r, &pathError{path: ".if", err: cleanJSONErr(err)}
	}
	return r, nil
}

// ParseDynamicLists decodes dynamic-lists.json.
func ParseDynamicLists(file string, b []byte) (*DynamicLists, error) {
	var l DynamicLists
	if err := decodeExact(b, &l); err != nil {
		return nil, fileErr(file, "", jsonErr(b, err))
	}
	if l.Lists == nil {
		return nil, fileErr(file, "lists", errors.New("missing"))
	}
	if err := checkArtifact(file, b); err != nil {
		return nil, err
	}
	return &l, nil
}

// FileError names the artifact and the JSON path (or settings field) of a
// load error.
type FileError struct {
	File string
	Path string
	Err  error
}

func (e *FileError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

func fileErr(file, path string, err error) error {
	var fe *FileError
	if errors.As(err, &fe) && fe.File == "" {
		path = joinPath(path, fe.Path)
		err = fe.Err
	}
	return &FileError{File: file, Path: path, Err: err}
}

// joinPath joins JSON path segments ("a" + "b" = "a.b", "a" + "[1]" = "a[1]").
func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}

// jsonErr adds a line and column (1-based, of the byte where reading
// stopped) to JSON syntax and type errors; a name given twice is named by
// its path.
func jsonErr(b []byte, err error) error {
	var off int64 = -1
	var se *jsontext.SyntacticError
	var me *jsonv2.SemanticError
	switch {
	case errors.As(err, &se) && errors.Is(err, jsontext.ErrDuplicateName):
		return &FileError{Path: pointerPath(string(se.JSONPointer)), Err: errors.New("a name appears twice in one object")}
	case errors.As(err, &se):
		off = se.ByteOffset
		if se.Err != nil {
			err = se.Err
		}
	case errors.As(err, &me):
		off = me.ByteOffset
	}
	if off < 0 {
		return err
	}
	line := 1 + bytes.Count(b[:min(int(off), len(b))], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(b[:min(int(off), len(b))], '\n')
	return fmt.Errorf("line %d, column %d: %w", line, col, cleanJSONErr(err))
}

// cleanJSONErr drops encoding/json's "json: " prefix.
func cleanJSONErr(err error) error {
	msg := err.Error()
	for _, p := range []string{"json: ", "jsontext: "} {
		if strings.HasPrefix(msg, p) {
			return errors.New(strings.TrimPrefix(msg, p))
		}
	}
	return err
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
