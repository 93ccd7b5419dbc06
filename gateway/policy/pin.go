package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// RuleToolChanged denies calls to an external tool whose definition (name,
// description or input schema) is not the one pinned with its annotation:
// the server changed it after it was reviewed (a "rug pull"), or it was
// never pinned. `ironcurtain tools pin` accepts a new definition.
const RuleToolChanged = "structural-tool-changed"

// PinPrefix starts every pin hash.
const PinPrefix = "sha256:"

// ToolPin is the definition of an external tool as it was reviewed: the
// hash of its name, description and canonical input schema, and the
// description itself (the schema is the annotation's InputSchema), so that
// a change can be shown as a diff. In tool-annotations.json it is the
// entry's "pin" object: {"sha256": "sha256:…", "description": "…"}.
type ToolPin struct {
	Hash        string `json:"sha256"`
	Description string `json:"description"`
}

// ToolDefinition is a tool as its server lists it.
type ToolDefinition struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// CanonicalSchema returns the input schema in the form that is hashed and
// stored: keys sorted, no insignificant space, numbers as written; an empty
// or null schema is {"type":"object"}. An error means the schema is not
// JSON.
func CanonicalSchema(raw json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("reading the input schema: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("reading the input schema: trailing data")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the input schema: %w", err)
	}
	return b, nil
}

// Hash is the pin hash of d: SHA-256 over a version tag and the exact
// bytes of the name, the description and the canonical schema, each
// preceded by its length (no two definitions share an encoding; invalid
// UTF-8 is hashed as it is, not replaced).
func (d ToolDefinition) Hash() (string, error) {
	schema, err := CanonicalSchema(d.InputSchema)
	if err != nil {
		return "", fmt.Errorf("hashing tool %q: %w", d.Name, err)
	}
	h := sha256.New()
	h.Write([]byte("ironcurtain tool pin v1\x00"))
	for _, part := range [][]byte{[]byte(d.Name), []byte(d.Description), schema} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return PinPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// Pin returns the pin of d.
func (d ToolDefinition) Pin() (ToolPin, error) {
	h, err := d.Hash()
	if err != nil {
		return ToolPin{}, err
	}
	return ToolPin{Hash: h, Description: d.Description}, nil
}

// PinCheck is the result of comparing a listed definition with a pin.
type PinCheck struct {
	// OK is true when the hashes are equal.
	OK bool
	// Changed names what differs, among "name", "description", "schema";
	// "unpinned" when the annotation carries no pin, "unreadable" when the
	// listed schema is not JSON.
	Changed []string
}

// String is the changed fields joined by commas ("" when OK).
func (c PinCheck) String() string { return strings.Join(c.Changed, ",") }

// CheckPin compares the listed definition d with the pinned annotation a
// (looked up under d's server and name). A missing pin never matches.
func CheckPin(a ToolAnnotation, d ToolDefinition) PinCheck {
	if a.Pin == nil || a.Pin.Hash == "" {
		return PinCheck{Changed: []string{"unpinned"}}
	}
	h, err := d.Hash()
	if err != nil {
		return PinCheck{Changed: []string{"unreadable"}}
	}
	if h == a.Pin.Hash {
		return PinCheck{OK: true}
	}
	var changed []string
	if a.Tool != d.Name {
		changed = append(changed, "name")
	}
	if a.Pin.Description != d.Description {
		changed = append(changed, "description")
	}
	got, _ := CanonicalSchema(d.InputSchema)
	want, err := CanonicalSchema(a.InputSchema)
	if err != nil || !bytes.Equal(got, want) {
		changed = append(changed, "schema")
	}
	if len(changed) == 0 {
		// The hash differs although the stored description and schema
		// match: the stored copy was edited, or the pin is stale.
		changed = append(changed, "pin")
	}
	return PinCheck{Changed: changed}
}
