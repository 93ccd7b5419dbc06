package toolargs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

func TestSchema(t *testing.T) {
	custom := map[string]any{"type": "array", "items": map[string]any{"type": "object"}}
	tests := []struct {
		name string
		args []Arg
		want string
	}{
		{name: "no arguments", args: nil,
			want: `{"additionalProperties":false,"properties":{},"type":"object"}`},
		{name: "required string with description", args: []Arg{{Name: "path", Kind: String, Required: true, Desc: "A path."}},
			want: `{"additionalProperties":false,"properties":{"path":{"description":"A path.","type":"string"}},"required":["path"],"type":"object"}`},
		{name: "enum", args: []Arg{{Name: "mode", Kind: String, Enum: []string{"soft", "hard"}}},
			want: `{"additionalProperties":false,"properties":{"mode":{"enum":["soft","hard"],"type":"string"}},"type":"object"}`},
		{name: "string list", args: []Arg{{Name: "files", Kind: Strings}},
			want: `{"additionalProperties":false,"properties":{"files":{"items":{"type":"string"},"type":"array"}},"type":"object"}`},
		{name: "integer without maximum", args: []Arg{{Name: "head", Kind: Int}},
			want: `{"additionalProperties":false,"properties":{"head":{"minimum":0,"type":"integer"}},"type":"object"}`},
		{name: "integer with maximum", args: []Arg{{Name: "n", Kind: Int, Max: 1000}},
			want: `{"additionalProperties":false,"properties":{"n":{"maximum":1000,"minimum":0,"type":"integer"}},"type":"object"}`},
		{name: "boolean with default", args: []Arg{{Name: "dryRun", Kind: Bool, Default: false}},
			want: `{"additionalProperties":false,"properties":{"dryRun":{"default":false,"type":"boolean"}},"type":"object"}`},
		{name: "custom", args: []Arg{{Name: "edits", Kind: Custom, Schema: custom, Desc: "Edits."}},
			want: `{"additionalProperties":false,"properties":{"edits":{"description":"Edits.","items":{"type":"object"},"type":"array"}},"type":"object"}`},
		{name: "required in declaration order", args: []Arg{{Name: "b", Kind: String, Required: true}, {Name: "a", Kind: Bool, Required: true}},
			want: `{"additionalProperties":false,"properties":{"a":{"type":"boolean"},"b":{"type":"string"}},"required":["b","a"],"type":"object"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Schema(tt.args)); got != tt.want {
				t.Fatalf("schema\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	if _, ok := custom["description"]; ok {
		t.Fatal("Schema wrote into a declared Custom schema")
	}
}

// recv is a test server whose handlers are methods.
type recv struct {
	calls  int
	cancel context.CancelFunc
}

func (r *recv) echo(_ context.Context, a *Args) (servers.Result, error) {
	r.calls++
	return servers.Text("path=" + a.Str("path")), nil
}

func (r *recv) broken(context.Context, *Args) (servers.Result, error) {
	r.calls++
	return servers.Result{}, errors.New("disk on fire at /host/secret")
}

func (r *recv) cancelled(context.Context, *Args) (servers.Result, error) {
	r.cancel()
	return servers.Result{}, errors.New("interrupted")
}

var testTools = []Tool[*recv]{
	{Name: "echo", Desc: "Echo.", Comment: "Echoes.", Args: []Arg{{Name: "path", Kind: String, Required: true,
		Roles: policy.Static(policy.RoleReadPath)}}, Run: (*recv).echo},
	{Name: "broken", Desc: "Fails.", Comment: "Fails.", Run: (*recv).broken},
	{Name: "cancelled", Desc: "Cancels.", Comment: "Cancels.", Run: (*recv).cancelled},
}

// fail is what a server does with a failure: show a safe message only.
func fail(tool string, err error) servers.Result {
	var ae *Error
	if errors.As(err, &ae) {
		return servers.ToolError(ae.Error())
	}
	return servers.ToolError(tool + " failed")
}

func TestSetCall(t *testing.T) {
	tests := []struct {
		name      string
		tool      string
		args      map[string]any
		cancelled bool
		want      string
		isError   bool
		wantErr   string
		calls     int
	}{
		{name: "runs the handler", tool: "echo", args: map[string]any{"path": "/s/a"}, want: "path=/s/a", calls: 1},
		{name: "unknown tool", tool: "merge_pull_request", args: nil, want: `unknown tool "merge_pull_request"`, isError: true},
		{name: "unknown tool name is clipped", tool: strings.Repeat("x", 100), want: `unknown tool "` + strings.Repeat("x", 64) + `..."`, isError: true},
		{name: "refused arguments never reach the handler", tool: "echo", args: map[string]any{"path": "/s/a", "follow": true},
			want: `unknown argument "follow"`, isError: true},
		{name: "handler failure goes through fail", tool: "broken", want: "broken failed", isError: true, calls: 1},
		{name: "cancelled before the call", tool: "echo", args: map[string]any{"path": "/s/a"}, cancelled: true,
			wantErr: "calling test echo: context canceled"},
		{name: "cancelled during the call", tool: "cancelled", wantErr: "calling test cancelled: context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &recv{cancel: cancel}
			set := NewSet("test", r, testTools, fail)
			if tt.cancelled {
				cancel()
			}
			res, err := set.Call(ctx, tt.tool, tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 || res.Content[0].Text != tt.want || res.IsError != tt.isError {
				t.Fatalf("result = %+v, want %q (isError %v)", res, tt.want, tt.isError)
			}
			if r.calls != tt.calls {
				t.Fatalf("handler ran %d times, want %d", r.calls, tt.calls)
			}
		})
	}
}

func TestSetTools(t *testing.T) {
	set := NewSet("test", &recv{}, testTools, fail)
	tools := set.Tools()
	if len(tools) != len(testTools) {
		t.Fatalf("%d tools", len(tools))
	}
	echo := tools[0]
	ann := echo.Annotation
	if echo.Name != "echo" || echo.Description != "Echo." || ann.Tool != "echo" || ann.Server != "test" || ann.Comment != "Echoes." {
		t.Fatalf("tool = %+v", echo)
	}
	if string(ann.InputSchema) != string(echo.InputSchema) || len(ann.Args) != 1 || ann.Args[0].Name != "path" ||
		len(ann.Args[0].Spec.Default) != 1 || ann.Args[0].Spec.Default[0] != policy.RoleReadPath {
		t.Fatalf("annotation = %+v", ann)
	}
	if a := tools[1].Annotation.Args; a == nil || len(a) != 0 {
		t.Fatalf("a tool without arguments annotates %#v, want an empty list", a)
	}
	tools[0].Name = "changed"
	if set.Tools()[0].Name != "echo" {
		t.Fatal("Tools returned the set's own slice")
	}
}

func BenchmarkSetCall(b *testing.B) {
	set := NewSet("test", &recv{}, testTools, fail)
	ctx := context.Background()
	raw := map[string]any{"path": "/sandbox/a"}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := set.Call(ctx, "echo", raw); err != nil || res.IsError {
			b.Fatal(err)
		}
	}
}
