package tsdecl

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"
)

var update = flag.Bool("update", false, "rewrite golden files")

// listedTool is the tools/list wire form used by the golden inputs.
type listedTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

func loadTools(t *testing.T, path string) []Tool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var listed []listedTool
	if err := json.Unmarshal(raw, &listed); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	tools := make([]Tool, len(listed))
	for i, l := range listed {
		tools[i] = Tool(l)
	}
	return tools
}

// transpiles reports esbuild's errors for src as TypeScript ("" when clean).
func transpiles(src string) string {
	res := api.Transform(src, api.TransformOptions{Loader: api.LoaderTS, LogLevel: api.LogLevelSilent})
	var msgs []string
	for _, m := range res.Errors {
		line := 0
		if m.Location != nil {
			line = m.Location.Line
		}
		msgs = append(msgs, m.Text+" (line "+itoa(line)+")")
	}
	return strings.Join(msgs, "; ")
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			decl := Generate(loadTools(t, in))
			if msg := transpiles(decl.Source); msg != "" {
				t.Fatalf("declaration does not transpile: %s\n%s", msg, decl.Source)
			}
			golden := strings.TrimSuffix(in, ".json") + ".d.ts"
			if *update {
				if err := os.WriteFile(golden, []byte(decl.Source), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden (run with -update): %v", err)
			}
			if string(want) != decl.Source {
				t.Errorf("declaration differs from %s (run go test -update and review the diff)\n--- got ---\n%s", golden, decl.Source)
			}
		})
	}
}

func TestBindings(t *testing.T) {
	tests := []struct {
		name  string
		tools []string
		want  []string // namespace.function=tool
	}{
		{
			name:  "server prefix becomes namespace",
			tools: []string{"git__status", "filesystem__read_text_file"},
			want:  []string{"filesystem.read_text_file=filesystem__read_text_file", "git.status=git__status"},
		},
		{
			name:  "no prefix goes to tools",
			tools: []string{"lonely"},
			want:  []string{"tools.lonely=lonely"},
		},
		{
			name:  "reserved words and globals get a suffix",
			tools: []string{"JSON__delete", "console__log", "class__new"},
			want:  []string{"JSON_.delete_=JSON__delete", "class_.new_=class__new", "console_.log=console__log"},
		},
		{
			name:  "collisions after sanitising are numbered",
			tools: []string{"a-b__x", "a_b__x", "s__t-u", "s__t_u"},
			want:  []string{"a_b.x=a-b__x", "a_b_2.x=a_b__x", "s.t_u=s__t-u", "s.t_u_2=s__t_u"},
		},
		{
			name:  "leading digit and unicode",
			tools: []string{"9srv__été"},
			want:  []string{"_9srv._t_=9srv__été"},
		},
		{
			name:  "duplicate tool listed once",
			tools: []string{"git__status", "git__status"},
			want:  []string{"git.status=git__status"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tools []Tool
			for _, n := range tc.tools {
				tools = append(tools, Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)})
			}
			decl := Generate(tools)
			var got []string
			for _, f := range decl.Functions {
				got = append(got, f.Qualified()+"="+f.Tool)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("bindings = %v, want %v", got, tc.want)
			}
			if msg := transpiles(decl.Source); msg != "" {
				t.Errorf("does not transpile: %s\n%s", msg, decl.Source)
			}
		})
	}
}

func TestSchemaTypes(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   string
	}{
		{name: "string", schema: `{"type":"string"}`, want: "string"},
		{name: "integer", schema: `{"type":"integer"}`, want: "number"},
		{name: "nullable union", schema: `{"type":["string","null"]}`, want: "string | null"},
		{name: "enum", schema: `{"enum":["a","b",3,true,null]}`, want: `"a" | "b" | 3 | true | null`},
		{name: "empty enum", schema: `{"enum":[]}`, want: "never"},
		{name: "array of strings", schema: `{"type":"array","items":{"type":"string"}}`, want: "string[]"},
		{name: "array of union", schema: `{"type":"array","items":{"type":["string","number"]}}`, want: "Array<string | number>"},
		{name: "array no items", schema: `{"type":"array"}`, want: "unknown[]"},
		{name: "map", schema: `{"type":"object","additionalProperties":{"type":"number"}}`, want: "{ [key: string]: number }"},
		{name: "closed empty object", schema: `{"type":"object","properties":{},"additionalProperties":false}`, want: "{}"},
		{name: "false schema", schema: `false`, want: "never"},
		{name: "true schema", schema: `true`, want: "unknown"},
		{name: "no type", schema: `{}`, want: "unknown"},
		{name: "unknown type", schema: `{"type":"date"}`, want: "unknown"},
		{name: "recursive ref", schema: `{"$ref":"#"}`, want: "unknown"},
		{name: "dangling ref", schema: `{"$ref":"#/$defs/nope"}`, want: "unknown"},
		{name: "remote ref", schema: `{"$ref":"https://example.invalid/s.json"}`, want: "unknown"},
		{name: "openapi nullable", schema: `{"type":"number","nullable":true}`, want: "number | null"},
		{name: "const string", schema: `{"const":"x\"y"}`, want: `"x\"y"`},
		{name: "huge number literal", schema: `{"const":1e999}`, want: "number"},
		{name: "oneOf", schema: `{"oneOf":[{"type":"string"},{"type":"array","items":{"type":"string"}}]}`, want: "string | string[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := parseSchema(json.RawMessage(tc.schema))
			r := renderer{root: s}
			if got := r.render(s, 1); got != tc.want {
				t.Errorf("render(%s) = %q, want %q", tc.schema, got, tc.want)
			}
		})
	}
}

func TestOptionalArgs(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   string
	}{
		{name: "required property makes args required", schema: `{"type":"object","properties":{"p":{"type":"string"}},"required":["p"]}`, want: "function f(args: {"},
		{name: "no required property makes args optional", schema: `{"type":"object","properties":{"p":{"type":"string"}}}`, want: "function f(args?: {"},
		{name: "missing schema", schema: ``, want: "function f(args?: { [key: string]: unknown }): string;"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			decl := Generate([]Tool{{Name: "s__f", InputSchema: json.RawMessage(tc.schema)}})
			if !strings.Contains(decl.Source, tc.want) {
				t.Errorf("declaration lacks %q:\n%s", tc.want, decl.Source)
			}
		})
	}
}

func TestDocCommentCannotEscape(t *testing.T) {
	decl := Generate([]Tool{{
		Name:        "evil__tool",
		Description: "ends the comment */ declare const pwned: 1; /* and\u2028more\x00",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","description":"*/ function x() {} /*"}}}`),
	}})
	if msg := transpiles(decl.Source); msg != "" {
		t.Fatalf("does not transpile: %s", msg)
	}
	res := api.Transform(decl.Source, api.TransformOptions{Loader: api.LoaderTS})
	if strings.TrimSpace(string(res.Code)) != "" {
		t.Errorf("description text leaked out of its comment into code: %q", res.Code)
	}
}

// FuzzGenerate feeds arbitrary JSON as input and output schemas: Generate
// must never panic and its output must always transpile as TypeScript.
func FuzzGenerate(f *testing.F) {
	seeds := []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"type":["object","array"],"items":{"$ref":"#"},"properties":{"x y":{"enum":[1,"2",null,{}]}}}`,
		`{"anyOf":[{"type":"string"},{"allOf":[{"type":"object"},{"$ref":"#/anyOf/0"}]}]}`,
		`{"type":"object","additionalProperties":{"type":"array","prefixItems":[true,false]}}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`[1,2,3]`, `"str"`, `null`, `{"description":"*/ x /*"}`, `not json`,
	}
	for _, s := range seeds {
		f.Add("srv__tool", "desc", s, `{"type":"object"}`)
	}
	f.Fuzz(func(t *testing.T, name, desc, in, out string) {
		decl := Generate([]Tool{
			{Name: name, Description: desc, InputSchema: json.RawMessage(in), OutputSchema: json.RawMessage(out)},
			{Name: "other__" + name, Description: desc, InputSchema: json.RawMessage(out)},
		})
		if msg := transpiles(decl.Source); msg != "" {
			t.Fatalf("declaration does not transpile: %s\n%s", msg, decl.Source)
		}
		for _, fn := range decl.Functions {
			if !isIdentifier(fn.Namespace) || !isIdentifier(fn.Name) {
				t.Fatalf("binding %q.%q is not an identifier", fn.Namespace, fn.Name)
			}
		}
	})
}

func BenchmarkGenerate(b *testing.B) {
	raw, err := os.ReadFile("testdata/filesystem_git.json")
	if err != nil {
		b.Fatal(err)
	}
	var listed []listedTool
	if err := json.Unmarshal(raw, &listed); err != nil {
		b.Fatal(err)
	}
	tools := make([]Tool, len(listed))
	for i, l := range listed {
		tools[i] = Tool(l)
	}
	b.ReportAllocs()
	for b.Loop() {
		Generate(tools)
	}
}
