package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Annotations is the content of tool-annotations.json
// (the original's StoredToolAnnotationsFile). The engine looks tools up as
// <servers key>__<toolName>; a tool's own serverName field is not used.
type Annotations struct {
	GeneratedAt string                        `json:"generatedAt,omitempty"`
	Servers     map[string]*ServerAnnotations `json:"servers"`
}

// ServerAnnotations holds the annotated tools of one server.
type ServerAnnotations struct {
	InputHash string           `json:"inputHash,omitempty"`
	Tools     []ToolAnnotation `json:"tools"`
}

// Add appends tool annotations under their Server, creating the server entry
// when needed. It does not check for duplicates (New does).
func (a *Annotations) Add(tools ...ToolAnnotation) {
	if a.Servers == nil {
		a.Servers = map[string]*ServerAnnotations{}
	}
	for _, t := range tools {
		s := a.Servers[t.Server]
		if s == nil {
			s = &ServerAnnotations{}
			a.Servers[t.Server] = s
		}
		s.Tools = append(s.Tools, t)
	}
}

// Arg returns the spec of the named argument.
func (t ToolAnnotation) Arg(name string) (ArgSpec, bool) {
	for _, a := range t.Args {
		if a.Name == name {
			return a.Spec, true
		}
	}
	return ArgSpec{}, false
}

// Conditional reports whether the spec is a conditional block.
func (s ArgSpec) Conditional() bool { return len(s.When) > 0 }

type toolAnnotationJSON struct {
	ToolName    string          `json:"toolName"`
	ServerName  string          `json:"serverName"`
	Comment     string          `json:"comment,omitempty"`
	Args        json.RawMessage `json:"args"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Pin         *ToolPin        `json:"pin,omitempty"`
}

// MarshalJSON writes the original's format, keeping argument order.
func (t ToolAnnotation) MarshalJSON() ([]byte, error) {
	var args bytes.Buffer
	args.WriteByte('{')
	for i, a := range t.Args {
		if i > 0 {
			args.WriteByte(',')
		}
		k, err := json.Marshal(a.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(a.Spec)
		if err != nil {
			return nil, fmt.Errorf("marshalling argument %q: %w", a.Name, err)
		}
		args.Write(k)
		args.WriteByte(':')
		args.Write(v)
	}
	args.WriteByte('}')
	return json.Marshal(toolAnnotationJSON{ToolName: t.Tool, ServerName: t.Server, Comment: t.Comment,
		Args: args.Bytes(), InputSchema: t.InputSchema, Pin: t.Pin})
}

// UnmarshalJSON reads the original's format, keeping argument order.
// Duplicate argument names are an error.
func (t *ToolAnnotation) UnmarshalJSON(b []byte) error {
	var raw toolAnnotationJSON
	if err := decodeExact(b, &raw); err != nil {
		return err
	}
	*t = ToolAnnotation{Tool: raw.ToolName, Server: raw.ServerName, Comment: raw.Comment, Pin: raw.Pin}
	if len(raw.InputSchema) > 0 && !bytes.Equal(bytes.TrimSpace(raw.InputSchema), []byte("null")) {
		t.InputSchema = append(json.RawMessage(nil), raw.InputSchema...)
	}
	if len(bytes.TrimSpace(raw.Args)) == 0 {
		return &FileError{Path: "args", Err: errors.New("missing")}
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Args))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("args: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return &FileError{Path: "args", Err: errors.New("must be an object")}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("args: %w", err)
		}
		name := tok.(string) // object keys are always strings
		if seen[name] {
			return &FileError{Path: "args." + name, Err: errors.New("duplicate argument")}
		}
		seen[name] = true
		var spec ArgSpec
		if err := dec.Decode(&spec); err != nil {
			return &FileError{Path: "args." + name, Err: cleanJSONErr(err)}
		}
		t.Args = append(t.Args, ArgAnnotation{Name: name, Spec: spec})
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("args: %w", err)
	}
	return nil
}

type condSpecJSON struct {
	Default []Role             `json:"default"`
	When    []ConditionalRoles `json:"when"`
}

// MarshalJSON writes a static spec as an array and a conditional one as
// {"default": [...], "when": [...]}.
func (s ArgSpec) MarshalJSON() ([]byte, error) {
	def := s.Default
	if def == nil {
		def = []Role{}
	}
	if len(s.When) == 0 {
		return json.Marshal(def)
	}
	return json.Marshal(condSpecJSON{Default: def, When: s.When})
}

// UnmarshalJSON accepts an array of roles or a conditional block; unknown
// keys in a conditional block are an error.
func (s *ArgSpec) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '[':
		var roles []Role
		if err := json.Unmarshal(b, &roles); err != nil {
			return err
		}
		*s = ArgSpec{Default: roles}
		return nil
	case len(b) > 0 && b[0] == '{':
		var c condSpecJSON
		if err := strictUnmarshal(b, &c); err != nil {
			return err
		}
		if c.Default == nil {
			return errors.New("conditional roles: default is missing")
		}
		*s = ArgSpec{Default: c.Default, When: c.When}
		return nil
	}
	return errors.New("must be an array of roles or a conditional {default, when} block")
}

// UnmarshalJSON requires exactly one of equals, in and is.
func (c *ArgCondition) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = ArgCondition{}
	ops := 0
	for k, v := range raw {
		switch k {
		case "arg":
			if err := json.Unmarshal(v, &c.Arg); err != nil {
				return fmt.Errorf("arg: %w", err)
			}
		case "equals":
			ops++
			val, err := decodeScalar(v)
			if err != nil {
				return fmt.Errorf("equals: %w", err)
			}
			c.Equals = val
		case "in":
			ops++
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil {
				return fmt.Errorf("in: %w", err)
			}
			c.In = make([]any, 0, len(list))
			for i, item := range list {
				val, err := decodeScalar(item)
				if err != nil {
					return fmt.Errorf("in[%d]: %w", i, err)
				}
				c.In = append(c.In, val)
			}
		case "is":
			ops++
			if err := json.Unmarshal(v, &c.Is); err != nil {
				return fmt.Errorf("is: %w", err)
			}
			switch c.Is {
			case "present", "absent", "truthy", "falsy":
			default:
				return fmt.Errorf("is: %q is not present, absent, truthy or falsy", c.Is)
			}
		default:
			return fmt.Errorf("unknown key %q", k)
		}
	}
	if c.Arg == "" {
		return errors.New("arg: missing")
	}
	if ops != 1 {
		return errors.New("exactly one of equals, in and is must be set")
	}
	return nil
}

// decodeScalar decodes a JSON string, number or boolean the way request
// arguments are decoded (numbers as float64).
func decodeScalar(b json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	switch v.(type) {
	case string, float64, bool:
		return v, nil
	}
	return nil, errors.New("must be a string, number or boolean")
}

// ParseAnnotations decodes tool-annotations.json. Errors name the file
// (when given) and the JSON path.
func ParseAnnotations(file string, b []byte) (*Annotations, error) {
	var raw struct {
		GeneratedAt string                     `json:"generatedAt"`
		Servers     map[string]json.RawMessage `json:"servers"`
	}
	if err := decodeExact(b, &raw); err != nil {
		return nil, fileErr(file, "", jsonErr(b, err))
	}
	if raw.Servers == nil {
		return nil, fileErr(file, "servers", errors.New("missing"))
	}
	a := &Annotations{GeneratedAt: raw.GeneratedAt, Servers: make(map[string]*ServerAnnotations, len(raw.Servers))}
	names := make([]string, 0, len(raw.Servers))
	for n := range raw.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		var srv struct {
			InputHash string            `json:"inputHash"`
			Tools     []json.RawMessage `json:"tools"`
		}
		if err := decodeExact(raw.Servers[name], &srv); err != nil {
			return nil, fileErr(file, "servers."+name, err)
		}
		sa := &ServerAnnotations{InputHash: srv.InputHash}
		for i, rt := range srv.Tools {
			var t ToolAnnotation
			if err := decodeExact(rt, &t); err != nil {
				return nil, fileErr(file, fmt.Sprintf("servers.%s.tools[%d]", name, i), err)
			}
			sa.Tools = append(sa.Tools, t)
		}
		a.Servers[name] = sa
	}
	if err := checkArtifact(file, b); err != nil {
		return nil, err
	}
	return a, nil
}
