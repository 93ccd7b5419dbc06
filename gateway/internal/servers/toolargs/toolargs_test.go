package toolargs

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

var testSpec = []Arg{
	{Name: "path", Kind: String, Required: true},
	{Name: "mode", Kind: String, Enum: []string{"soft", "hard"}},
	{Name: "files", Kind: Strings},
	{Name: "head", Kind: Int},
	{Name: "count", Kind: Int, Max: 100},
	{Name: "force", Kind: Bool},
	{Name: "pair", Kind: Custom, Parse: func(v any) (any, error) {
		s, ok := v.(string)
		if !ok || !strings.Contains(s, "=") {
			return nil, errors.New("pair must be k=v")
		}
		k, val, _ := strings.Cut(s, "=")
		return [2]string{k, val}, nil
	}},
}

func TestParseRefusals(t *testing.T) {
	long := strings.Repeat("k", 200)
	tests := []struct {
		name string
		raw  map[string]any
		want string // the exact agent-facing message
	}{
		{name: "unknown key", raw: map[string]any{"path": "/a", "git_dir": "/"}, want: `unknown argument "git_dir"`},
		{name: "long unknown key is clipped", raw: map[string]any{"path": "/a", long: 1}, want: `unknown argument "` + long[:64] + `..."`},
		{name: "control characters in a key are quoted", raw: map[string]any{"path": "/a", "x\x1b[2J": 1}, want: `unknown argument "x\x1b[2J"`},
		{name: "missing required", raw: map[string]any{}, want: `missing argument "path"`},
		{name: "null required counts as missing", raw: map[string]any{"path": nil}, want: `missing argument "path"`},
		{name: "string of the wrong type", raw: map[string]any{"path": []any{"/a"}}, want: `argument "path" must be a string`},
		{name: "value outside the enum", raw: map[string]any{"path": "/a", "mode": "keep"}, want: `argument "mode" must be one of ["soft" "hard"]`},
		{name: "enum is case-sensitive", raw: map[string]any{"path": "/a", "mode": "HARD"}, want: `argument "mode" must be one of ["soft" "hard"]`},
		{name: "list with a number", raw: map[string]any{"path": "/a", "files": []any{"a", 1.0}}, want: `argument "files" must be an array of strings`},
		{name: "list that is a string", raw: map[string]any{"path": "/a", "files": "a"}, want: `argument "files" must be an array of strings`},
		{name: "negative integer", raw: map[string]any{"path": "/a", "head": -1.0}, want: `argument "head" must be a non-negative integer`},
		{name: "fractional integer", raw: map[string]any{"path": "/a", "head": 1.5}, want: `argument "head" must be a non-negative integer`},
		{name: "huge integer", raw: map[string]any{"path": "/a", "head": 1e300}, want: `argument "head" must be a non-negative integer`},
		{name: "integer past MaxInt32", raw: map[string]any{"path": "/a", "head": int64(math.MaxInt32) + 1}, want: `argument "head" must be a non-negative integer`},
		{name: "NaN", raw: map[string]any{"path": "/a", "head": math.NaN()}, want: `argument "head" must be a non-negative integer`},
		{name: "integer as a string", raw: map[string]any{"path": "/a", "head": "1"}, want: `argument "head" must be a non-negative integer`},
		{name: "unparsable json.Number", raw: map[string]any{"path": "/a", "head": json.Number("1e999")}, want: `argument "head" must be a non-negative integer`},
		{name: "integer above its maximum", raw: map[string]any{"path": "/a", "count": 101.0}, want: `argument "count" must be an integer from 0 to 100`},
		{name: "bool as a string", raw: map[string]any{"path": "/a", "force": "true"}, want: `argument "force" must be a boolean`},
		{name: "custom refusal is passed through", raw: map[string]any{"path": "/a", "pair": "x"}, want: "pair must be k=v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Parse(testSpec, tt.raw)
			if err == nil {
				t.Fatalf("accepted %v as %+v", tt.raw, a)
			}
			if err.Error() != tt.want {
				t.Fatalf("error = %q, want %q", err, tt.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	files := []string{"a", "b"}
	raw := map[string]any{"path": "/a", "mode": "hard", "files": files, "head": json.Number("7"),
		"count": 100, "force": false, "pair": "k=v"}
	a, err := Parse(testSpec, raw)
	if err != nil {
		t.Fatal(err)
	}
	files[0] = "changed" // the caller's slice is copied
	n, ok := a.Int("head")
	c, _ := a.Int("count")
	tests := []struct {
		name string
		got  any
		want any
	}{
		{name: "string", got: a.Str("path"), want: "/a"},
		{name: "enum", got: a.Str("mode"), want: "hard"},
		{name: "list", got: strings.Join(a.Strings("files"), ","), want: "a,b"},
		{name: "json.Number", got: n, want: int64(7)},
		{name: "json.Number present", got: ok, want: true},
		{name: "Go int at the maximum", got: c, want: int64(100)},
		{name: "false is present", got: a.Has("force"), want: true},
		{name: "false", got: a.Bool("force"), want: false},
		{name: "custom", got: a.Value("pair"), want: [2]string{"k", "v"}},
		{name: "raw", got: a.Raw()["mode"], want: "hard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestParseAbsent(t *testing.T) {
	a, err := Parse(testSpec, map[string]any{"path": "/a", "mode": nil, "files": nil, "head": nil, "force": nil, "pair": nil})
	if err != nil {
		t.Fatalf("nulls refused: %v", err)
	}
	for _, name := range []string{"mode", "files", "head", "count", "force", "pair"} {
		t.Run(name, func(t *testing.T) {
			if a.Has(name) {
				t.Fatalf("absent %s reported present", name)
			}
			if _, ok := a.Int(name); ok || a.Str(name) != "" || a.Strings(name) != nil || a.Bool(name) || a.Value(name) != nil {
				t.Fatalf("absent %s has a value", name)
			}
		})
	}
}

// TestParseDeclarationBugs: a declaration without a kind (or a Custom
// without a parser) is refused with an error that is not an *Error, so
// servers show a generic failure instead of internal detail.
func TestParseDeclarationBugs(t *testing.T) {
	tests := []struct {
		name string
		spec []Arg
	}{
		{name: "no kind", spec: []Arg{{Name: "x"}}},
		{name: "custom without parser", spec: []Arg{{Name: "x", Kind: Custom}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.spec, map[string]any{"x": "v"})
			var ae *Error
			if err == nil || errors.As(err, &ae) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "short", in: "abc", want: "abc"},
		{name: "exactly 64", in: strings.Repeat("a", 64), want: strings.Repeat("a", 64)},
		{name: "long", in: strings.Repeat("a", 65), want: strings.Repeat("a", 64) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Clip(tt.in); got != tt.want {
				t.Fatalf("Clip = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzParse: whatever JSON the agent sends, Parse never panics, never
// accepts an undeclared key or a missing required argument, and every
// accepted value has its declared type and range.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"path":"/a","mode":"soft","files":["x"],"head":3,"count":100,"force":true}`))
	f.Add([]byte(`{"path":1,"files":[1,"a"],"head":-1}`))
	f.Add([]byte(`{"path":"/a","head":1e300,"count":100.5,"extra":null}`))
	f.Add([]byte(`{"path":null,"mode":"HARD"}`))
	spec := testSpec[:len(testSpec)-1] // the custom test parser is not under test
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw map[string]any
		if json.Unmarshal(data, &raw) != nil {
			return
		}
		a, err := Parse(spec, raw)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("refusal is not an *Error: %v", err)
			}
			return
		}
		for k := range raw {
			if !slices.ContainsFunc(spec, func(s Arg) bool { return s.Name == k }) {
				t.Fatalf("accepted undeclared %q", k)
			}
		}
		if !a.Has("path") {
			t.Fatal("accepted without the required path")
		}
		if m := a.Str("mode"); a.Has("mode") && m != "soft" && m != "hard" {
			t.Fatalf("accepted mode %q", m)
		}
		if n, ok := a.Int("head"); ok && (n < 0 || n > math.MaxInt32) {
			t.Fatalf("accepted head %d", n)
		}
		if n, ok := a.Int("count"); ok && (n < 0 || n > 100) {
			t.Fatalf("accepted count %d", n)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	spec := []Arg{
		{Name: "path", Kind: String, Required: true, Roles: policy.Static(policy.RoleReadPath)},
		{Name: "paths", Kind: Strings},
		{Name: "max_count", Kind: Int, Max: 10000},
		{Name: "stat", Kind: Bool},
		{Name: "revision", Kind: String},
	}
	raw := map[string]any{"path": "/sandbox/repo", "paths": []any{"/sandbox/repo/a"}, "max_count": 20.0, "stat": true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(spec, raw); err != nil {
			b.Fatal(err)
		}
	}
}
