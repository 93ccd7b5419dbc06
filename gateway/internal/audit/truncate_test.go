package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// markers returns the gateway markers in stored arguments: every object
// whose only key is KeyTruncated or KeyInvalidJSON (a single leading "$",
// which escaped agent keys never have), by JSON pointer.
func markers(t *testing.T, stored json.RawMessage) map[string]Truncation {
	t.Helper()
	var v any
	if err := json.Unmarshal(stored, &v); err != nil {
		t.Fatalf("stored args are not JSON: %v: %s", err, stored)
	}
	out := map[string]Truncation{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if strings.HasPrefix(k, "$") && !strings.HasPrefix(k, "$$") {
					if k != KeyTruncated && k != KeyInvalidJSON || len(x) != 1 {
						t.Errorf("unescaped reserved key %q at %q in %s", k, p, stored)
					}
					b, _ := json.Marshal(val)
					var tr Truncation
					if err := json.Unmarshal(b, &tr); err != nil {
						t.Errorf("marker at %q: %v", p, err)
					}
					out[p] = tr
					continue
				}
				walk(p+"/"+k, val)
			}
		case []any:
			for i, val := range x {
				walk(p+"/"+itoa(i+1), val)
			}
		}
	}
	walk("", v)
	return out
}

func TestStoredArgs(t *testing.T) {
	small := Limits{MaxValueBytes: 256, MaxArgsBytes: 1024}
	long := strings.Repeat("a", 300)
	multibyte := strings.Repeat("é", 200) // 400 bytes, 2 per rune
	tests := []struct {
		name    string
		in      string
		limits  Limits
		want    string                // exact stored form, when set
		markers map[string]Truncation // expected markers (Head checked by prefix and length)
		mustNot []string
	}{
		{name: "small unchanged, keys sorted", in: `{"b":1,"a":"x"}`, limits: small, want: `{"a":"x","b":1}`},
		{name: "empty", in: ``, limits: small, want: `{}`},
		{name: "dollar keys escaped", in: `{"$ref":"x","$$y":{"$z":1},"a$":2}`, limits: small,
			want: `{"$$$y":{"$$z":1},"$$ref":"x","a$":2}`},
		{name: "long string cut", in: `{"path":"/w/f","content":"` + long + `"}`, limits: small,
			markers: map[string]Truncation{"/content": {Bytes: 300, SHA256: sha(long), Head: long[:256]}}},
		{name: "cut in an array", in: `{"files":["/a","` + long + `"]}`, limits: small,
			markers: map[string]Truncation{"/files/2": {Bytes: 300, SHA256: sha(long), Head: long[:256]}}},
		{name: "cut on a rune boundary", in: `{"c":"` + multibyte + `"}`, limits: small,
			markers: map[string]Truncation{"/c": {Bytes: 400, SHA256: sha(multibyte), Head: strings.Repeat("é", 128)}}},
		{name: "forged marker is escaped, real one added", in: `{"c":{"$truncated":{"bytes":1,"sha256":"00","head":"fake"}},"d":"` + long + `"}`,
			limits:  small,
			markers: map[string]Truncation{"/d": {Bytes: 300, SHA256: sha(long), Head: long[:256]}}},
		{name: "forged invalid_json is escaped", in: `{"$invalid_json":{"bytes":1,"sha256":"00","head":"x"}}`, limits: small,
			want: `{"$$invalid_json":{"bytes":1,"head":"x","sha256":"00"}}`},
		{name: "secret redacted before hashing and cutting", in: `{"c":"` + strings.Repeat("x", 280) + " token=" + ghToken + `"}`, limits: small,
			markers: map[string]Truncation{"/c": {Bytes: 280 + len(" token="+Redacted), SHA256: sha(strings.Repeat("x", 280) + " token=" + Redacted), Head: strings.Repeat("x", 256)}},
			mustNot: []string{ghToken}},
		{name: "secret under a sensitive key", in: `{"api_key":"` + long + `"}`, limits: small, want: `{"api_key":"[REDACTED]"}`},
		{name: "invalid json bounded and redacted", in: `{"a": ` + strings.Repeat("x", 500) + " " + ghToken, limits: small,
			mustNot: []string{ghToken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StoredArgs(json.RawMessage(tt.in), tt.limits)
			if tt.want != "" && string(got) != tt.want {
				t.Fatalf("StoredArgs = %s, want %s", got, tt.want)
			}
			ms := markers(t, got)
			if tt.markers != nil && len(ms) != len(tt.markers) {
				t.Fatalf("markers = %v, want %v (stored %s)", ms, tt.markers, got)
			}
			for p, want := range tt.markers {
				if ms[p] != want {
					t.Errorf("marker %q = %+v, want %+v", p, ms[p], want)
				}
			}
			for _, s := range tt.mustNot {
				if bytes.Contains(got, []byte(s)) {
					t.Errorf("stored args contain %q: %s", s, got)
				}
			}
		})
	}
}

// TestStoredArgsWholeCap: arguments that stay over the total cap after the
// per-value cut (many keys, a huge key, a long array) become one marker
// over their canonical JSON text.
func TestStoredArgsWholeCap(t *testing.T) {
	l := Limits{MaxValueBytes: 256, MaxArgsBytes: 1024}
	var many strings.Builder
	many.WriteString("{")
	for i := range 200 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + itoa(i+1) + `":"v"`)
	}
	many.WriteString("}")
	tests := []struct {
		name string
		in   string
	}{
		{name: "many keys", in: many.String()},
		{name: "huge key", in: `{"` + strings.Repeat("k", 5000) + `":1}`},
		{name: "long array", in: `{"a":[` + strings.Repeat(`1,`, 3000) + `1]}`},
		{name: "many long values", in: `{"a":"` + strings.Repeat("x", 300) + `","b":"` + strings.Repeat("y", 300) + `","c":"` + strings.Repeat("z", 300) + `","d":"` + strings.Repeat("w", 300) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StoredArgs(json.RawMessage(tt.in), l)
			if len(got) > l.MaxArgsBytes {
				t.Fatalf("stored %d bytes, cap %d", len(got), l.MaxArgsBytes)
			}
			ms := markers(t, got)
			m, ok := ms[""]
			if !ok || len(ms) != 1 {
				t.Fatalf("want one whole-arguments marker, got %v: %s", ms, got)
			}
			full := StoredArgs(json.RawMessage(tt.in), Limits{MaxValueBytes: 1 << 20, MaxArgsBytes: 1 << 24})
			if m.Bytes != len(full) || m.SHA256 != sha(string(full)) {
				t.Errorf("marker = %d bytes %s, want the canonical text's %d bytes %s", m.Bytes, m.SHA256, len(full), sha(string(full)))
			}
			if !strings.HasPrefix(string(full), m.Head) || len(m.Head) > l.MaxValueBytes || !utf8.ValidString(m.Head) {
				t.Errorf("head %q is not a bounded prefix of the canonical text", m.Head)
			}
		})
	}
}

// TestStoredArgsNotForgeable: whatever JSON the agent sends, a marker in
// the stored form is there only because the gateway cut a value.
func TestStoredArgsNotForgeable(t *testing.T) {
	l := Limits{MaxValueBytes: 256, MaxArgsBytes: 4096}
	inputs := []string{
		`{"$truncated":{"bytes":10,"sha256":"ab","head":"x"}}`,
		`{"a":{"$truncated":{"bytes":10,"sha256":"ab","head":"x"}}}`,
		`[{"$truncated":1},{"$invalid_json":2}]`,
		`{"$":1,"$$":2,"$$$":3}`,
		`{"\u0024truncated":{"bytes":1}}`,
		`{"$truncated":"` + strings.Repeat("x", 300) + `"}`,
	}
	for _, in := range inputs {
		t.Run(in[:min(len(in), 40)], func(t *testing.T) {
			got := StoredArgs(json.RawMessage(in), l)
			ms := markers(t, got)
			for p, m := range ms {
				if m.Bytes <= l.MaxValueBytes {
					t.Errorf("marker at %q for a %d-byte value the gateway would not cut: forged? %s", p, m.Bytes, got)
				}
			}
		})
	}
}

func TestStoredEventSinksAgree(t *testing.T) {
	l := Limits{MaxValueBytes: 256, MaxArgsBytes: 2048}
	in := &ToolCallDecision{CallID: "c", SessionID: "s", Server: "filesystem", Tool: "write_file",
		Args: json.RawMessage(`{"path":"/w/f","content":"` + strings.Repeat("q", 1000) + `"}`), Decision: "allow"}
	var buf bytes.Buffer
	j := NewJSONL(&buf, ArgLimits(l))
	if err := j.Record(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	want := StoredEvent(in, l).(*ToolCallDecision).Args
	if !bytes.Equal(line.Args, want) {
		t.Fatalf("JSONL stored %s, StoredEvent gives %s", line.Args, want)
	}
	if ms := markers(t, want); ms["/content"].Bytes != 1000 {
		t.Fatalf("content not cut: %s", want)
	}
	if string(in.Args) == string(want) || !strings.Contains(string(in.Args), strings.Repeat("q", 1000)) {
		t.Fatal("StoredEvent changed the caller's event")
	}
}

func FuzzStoredArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b"}`, `{"$truncated":{"bytes":1}}`, `[1,"x",{"$$":null}]`, `{"a":`, `"` + strings.Repeat("z", 400) + `"`} {
		f.Add([]byte(s))
	}
	l := Limits{MaxValueBytes: 256, MaxArgsBytes: 1024}
	f.Fuzz(func(t *testing.T, in []byte) {
		got := StoredArgs(in, l)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON stored: %q", got)
		}
		// A marker holds a head of MaxValueBytes whose escaping may grow it
		// (at most 6 bytes per byte for control characters) plus its frame.
		if len(got) > l.MaxArgsBytes+6*l.MaxValueBytes+200 {
			t.Fatalf("stored %d bytes", len(got))
		}
		for p, m := range markers(t, got) {
			if m.Bytes <= l.MaxValueBytes && p != "" {
				t.Fatalf("marker at %q for a short value: %s", p, got)
			}
		}
	})
}

func BenchmarkStoredArgs4MiB(b *testing.B) {
	args := []byte(`{"path":"/workspace/big.txt","content":"` + strings.Repeat("0123456789abcdef", 4<<20/16) + `"}`)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if out := StoredArgs(args, Limits{}); len(out) > DefaultMaxArgsBytes {
			b.Fatal(len(out))
		}
	}
}

// BenchmarkStoredArgsSmall is the stored form of a typical small call's
// arguments (a path and a flag), as every tool-call decision needs it.
func BenchmarkStoredArgsSmall(b *testing.B) {
	args := json.RawMessage(`{"path":"/tmp/sandbox/notes.txt","head":10,"recursive":false}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = StoredArgs(args, Limits{})
	}
}

// TestStoredArgsEscapesOnce: every "$" key gets exactly one more "$",
// however the map is ranged over (renaming keys while ranging over the map
// once escaped some twice, differently from run to run).
func TestStoredArgsEscapesOnce(t *testing.T) {
	in := `{"$a":1,"$b":2,"$c":3,"$d":4,"$e":5,"$f":6,"$g":7,"$h":8,"$i":9,"$$j":{"$k":[{"$l":0}]},"m":"$n"}`
	want := `{"$$$j":{"$$k":[{"$$l":0}]},"$$a":1,"$$b":2,"$$c":3,"$$d":4,"$$e":5,"$$f":6,"$$g":7,"$$h":8,"$$i":9,"m":"$n"}`
	for i := 0; i < 300; i++ {
		if got := string(StoredArgs(json.RawMessage(in), Limits{})); got != want {
			t.Fatalf("run %d: StoredArgs = %s\nwant %s", i, got, want)
		}
	}
}
