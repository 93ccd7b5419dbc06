package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// treeStoredArgs is StoredArgs as it was before storedEncoder: decode,
// redact, escape and truncate as values, then marshal. The encoder must
// write the same bytes.
func treeStoredArgs(args json.RawMessage, l Limits) json.RawMessage {
	l = l.withDefaults()
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return invalidMarker(args, l)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidMarker(args, l)
	}
	full := escapeKeys(redactValue(v, false))
	cut, changed := truncateValues(full, l.MaxValueBytes)
	out, err := marshal(cut)
	if err != nil {
		return invalidMarker(args, l)
	}
	if len(out) <= l.MaxArgsBytes {
		return out
	}
	whole := out
	if changed {
		if whole, err = marshal(full); err != nil {
			return invalidMarker(args, l)
		}
	}
	m, _ := marshal(map[string]any{KeyTruncated: truncation(string(whole), l.MaxValueBytes)})
	return m
}

// keysCollide reports whether some object in the JSON text has two keys
// that redact alike: the tree form then numbers them ("#2") in the order
// the map is ranged over, which varies from run to run, where the encoder
// takes the agent's keys in sorted order.
func keysCollide(args []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			seen := map[string]bool{}
			for k, val := range x {
				rk := RedactString(k)
				if seen[rk] || walk(val) {
					return true
				}
				seen[rk] = true
			}
		case []any:
			for _, val := range x {
				if walk(val) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

var storedEncoderCases = []string{
	`{}`, `[]`, `null`, `"x"`, `12`, `true`, ` {"a":1} `, `{"path":"/sandbox/src/main.go"}`,
	`{"b":1,"a":[1,2,{"d":null,"c":false}],"e":{"$ref":"x","$$ref":"y","$":"z"}}`,
	`{"n":-0,"m":1e400,"k":12345678901234567890123,"f":0.1E-7}`,
	`{"html":"<a href=\"x\">&amp;</a>","ctl":"\u0000\u0001\b\f\n\r\t\u001f\u007f","sep":"\u2028\u2029","bad":"\ud800"}`,
	`{"password":"hunter2","nested":{"api_key":["a","",{"x":"y"}]},"Authorization":"Bearer abcdefgh12345678"}`,
	`{"token":"","cookie":null,"secret":12,"pwd":true}`,
	`{"text":"key ghp_` + strings.Repeat("aB3dE5fG7h", 4) + ` and AKIAIOSFODNN7EXAMPLE"}`,
	`{"ghp_` + strings.Repeat("aB3dE5fG7h", 4) + `":"v","$ghp_` + strings.Repeat("Zz9Yy8Xx7W", 4) + `":1}`,
	`{"content":"` + strings.Repeat("é", 3000) + `","short":"x"}`,
	`{"a":"` + strings.Repeat("x", 70000) + `"}`,
	`{"list":[` + strings.Repeat(`"`+strings.Repeat("y", 300)+`",`, 300) + `"z"]}`,
	`{"a":1} x`, `{"a":`, "{\"a\":\"\xff\xfe\"}", `{"a":1,"a":2}`,
}

// TestStoredEncoderMatchesTree: StoredArgs writes the bytes the decode →
// redact → escape → truncate → marshal pipeline wrote, at the default
// limits and at small ones (so that values and the whole are cut).
func TestStoredEncoderMatchesTree(t *testing.T) {
	for _, l := range []Limits{{}, {MaxValueBytes: 256, MaxArgsBytes: 600}, {MaxValueBytes: 300}} {
		for _, in := range storedEncoderCases {
			if keysCollide([]byte(in)) {
				t.Fatalf("case %.60q has colliding keys: the tree form is not deterministic", in)
			}
			got, want := StoredArgs(json.RawMessage(in), l), treeStoredArgs(json.RawMessage(in), l)
			if !bytes.Equal(got, want) {
				t.Errorf("limits %+v, %.80q:\nencoder %.300s\ntree    %.300s", l, in, got, want)
			}
		}
	}
}

// TestStoredEncoderCollidingKeys: keys that redact alike are numbered in
// the order of the agent's keys, the same on every run.
func TestStoredEncoderCollidingKeys(t *testing.T) {
	a, b := "ghp_"+strings.Repeat("aB3dE5fG7h", 4), "ghp_"+strings.Repeat("Zz9Yy8Xx7W", 4)
	in := `{"` + b + `":2,"` + a + `":1,"[REDACTED]":3}`
	want := `{"[REDACTED]":3,"[REDACTED]#2":2,"[REDACTED]#3":1}` // "[" < "ghp_Z" < "ghp_a"
	for i := 0; i < 50; i++ {
		if got := string(StoredArgs(json.RawMessage(in), Limits{})); got != want {
			t.Fatalf("StoredArgs = %s, want %s", got, want)
		}
	}
}

// FuzzStoredEncoderMatchesTree: on any input and limits the encoder writes
// the tree form's bytes (inputs with colliding keys aside, see keysCollide).
func FuzzStoredEncoderMatchesTree(f *testing.F) {
	for _, in := range storedEncoderCases {
		if len(in) < 4096 {
			f.Add([]byte(in), 0, 0)
			f.Add([]byte(in), 256, 700)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, maxValue, maxArgs int) {
		if keysCollide(in) {
			return
		}
		l := Limits{MaxValueBytes: abs(maxValue) % 1024, MaxArgsBytes: abs(maxArgs) % 4096}
		got, want := StoredArgs(in, l), treeStoredArgs(in, l)
		if !bytes.Equal(got, want) {
			t.Fatalf("limits %+v, %q:\nencoder %s\ntree    %s", l, in, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("%q: stored form is not JSON: %s", in, got)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
