package annotate

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/gatewayconfig"
	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/gateway/policy"
)

func TestMain(m *testing.M) {
	if testenv.MaybeServeMCP() {
		return
	}
	os.Exit(m.Run())
}

func notesServer() gatewayconfig.Server {
	return gatewayconfig.Server{Name: "notes", Command: os.Args[0], Env: map[string]string{testenv.MCPServerEnv: "1"}}
}

func TestListTools(t *testing.T) {
	tools, err := ListTools(context.Background(), notesServer(), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "read_note" || tools[1].Name != "share_note" {
		t.Fatalf("tools = %+v", tools)
	}
	props, err := tools[1].properties()
	if err != nil || strings.Join(props, ",") != "dryRun,email,path" {
		t.Errorf("properties = %v, %v", props, err)
	}
	if _, err := ListTools(context.Background(), gatewayconfig.Server{Name: "fs"}, os.Getenv); err == nil || !strings.Contains(err.Error(), "built-in") {
		t.Errorf("built-in server: %v", err)
	}
	if _, err := ListTools(context.Background(), gatewayconfig.Server{Name: "x", Command: "/nonexistent/mcp"}, os.Getenv); err == nil || !strings.Contains(err.Error(), "connecting to x") {
		t.Errorf("missing binary: %v", err)
	}
	withRef := notesServer()
	withRef.Env["NOTES_TOKEN"] = "${NOTES_TOKEN_FOR_TEST}"
	if _, err := ListTools(context.Background(), withRef, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "servers.notes.env.NOTES_TOKEN refers to $NOTES_TOKEN_FOR_TEST") {
		t.Errorf("unset reference: %v", err)
	}
	getenv := func(k string) string {
		if k == "NOTES_TOKEN_FOR_TEST" {
			return "secret"
		}
		return os.Getenv(k)
	}
	if _, err := ListTools(context.Background(), withRef, getenv); err != nil {
		t.Errorf("set reference: %v", err)
	}
}

func ann(t *testing.T, js string) []policy.ToolAnnotation {
	t.Helper()
	var r reply
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	return r.Annotations
}

func TestCheckBatch(t *testing.T) {
	tools := map[string]ToolSchema{
		"move": {Name: "move", InputSchema: json.RawMessage(`{"type":"object","properties":{"src":{"type":"string"},"dst":{"type":"string"},"mode":{"type":"string"}}}`)},
		"ping": {Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	allowed := map[policy.Role]bool{}
	for _, d := range AllowedRoles("filesystem") {
		allowed[d.Role] = true
	}
	ok := `{"toolName":"ping","comment":"c","args":{}}`
	tests := []struct {
		name    string
		reply   string
		wantErr []string
	}{
		{name: "valid", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":["read-path","delete-path"],"dst":["write-path"],"mode":["none"]}},` + ok + `]}`},
		{name: "valid conditional", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":{"default":["read-path","delete-path"],"when":[{"condition":{"arg":"mode","equals":"copy"},"roles":["read-path"]}]},"dst":["write-path"],"mode":["none"]}},` + ok + `]}`},
		{name: "missing argument", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":["read-path"],"dst":["write-path"]}},` + ok + `]}`, wantErr: []string{"args.mode is missing"}},
		{name: "invented argument", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":["read-path"],"dst":["write-path"],"mode":["none"],"force":["none"]}},` + ok + `]}`, wantErr: []string{"args.force is not a property"}},
		{name: "role not offered", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":["github-owner"],"dst":["write-path"],"mode":["none"]}},` + ok + `]}`, wantErr: []string{`role "github-owner" is not offered`}},
		{name: "none combined", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":["none","read-path"],"dst":["write-path"],"mode":["none"]}},` + ok + `]}`, wantErr: []string{`"none" cannot be combined`}},
		{name: "condition widens", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":{"default":["read-path"],"when":[{"condition":{"arg":"mode","equals":"x"},"roles":["delete-path"]}]},"dst":["write-path"],"mode":["none"]}},` + ok + `]}`, wantErr: []string{"conditions may only narrow"}},
		{name: "condition on unknown arg", reply: `{"annotations":[{"toolName":"move","comment":"c","args":{"src":{"default":["read-path"],"when":[{"condition":{"arg":"flavour","is":"present"},"roles":["read-path"]}]},"dst":["write-path"],"mode":["none"]}},` + ok + `]}`, wantErr: []string{`names "flavour"`}},
		{name: "tool twice", reply: `{"annotations":[` + ok + `,` + ok + `]}`, wantErr: []string{"annotated twice", "tool move is not annotated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkBatch(ann(t, tt.reply), tools, allowed)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestAllowedRoles(t *testing.T) {
	has := func(server string, r policy.Role) bool {
		for _, d := range AllowedRoles(server) {
			if d.Role == r {
				return true
			}
		}
		return false
	}
	if has("git", policy.RoleEmailAddress) || !has("git", policy.RoleGitRemoteURL) {
		t.Error("a server the registry knows gets its roles only")
	}
	if !has("notes", policy.RoleReadPath) || !has("notes", policy.RoleFetchURL) || !has("notes", policy.RoleNone) {
		t.Error("an unknown external server may use every role")
	}
}

// TestAnnotateBatchesConcurrently splits four tools into batches of two:
// two prompts, answered concurrently, merged and sorted.
func TestAnnotateBatchesConcurrently(t *testing.T) {
	var tools []ToolSchema
	for _, n := range []string{"d", "b", "a", "c"} {
		tools = append(tools, ToolSchema{Name: n, InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)})
	}
	srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		var names []string
		for _, n := range []string{"a", "b", "c", "d"} {
			if strings.Contains(r.Last(), "\n### "+n+"\n") {
				names = append(names, n)
			}
		}
		var items []string
		for _, n := range names {
			items = append(items, `{"toolName":"`+n+`","comment":"c","args":{"x":["read-path"]}}`)
		}
		return fakemodel.Answer{Text: `{"annotations":[` + strings.Join(items, ",") + `]}`}
	})
	defer srv.Close()
	out, err := Annotate(context.Background(), testenv.Runner(t, srv, testenv.RunnerOptions{}), "notes", tools, 2)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Calls() != 2 || len(out) != 4 || out[0].Tool != "a" || out[3].Tool != "d" || out[0].Server != "notes" {
		t.Fatalf("%d calls, annotations %+v", srv.Calls(), out)
	}
	if string(out[0].InputSchema) != `{"properties":{"x":{"type":"string"}},"type":"object"}` {
		t.Errorf("input schema = %s", out[0].InputSchema)
	}
	if InputHash("notes", tools, 2) == InputHash("notes", tools[:3], 2) {
		t.Error("the input hash ignores the tool list")
	}
}

// TestRawSchemas: input schemas are read as the server sent them, with the
// JSON Schema keywords mcp-go's tool struct drops.
func TestRawSchemas(t *testing.T) {
	page := json.RawMessage(`{"tools":[{"name":"move","inputSchema":{"type":"object","description":"Where.",` +
		`"additionalProperties":false,"$defs":{"p":{"type":"string"}},"oneOf":[{"required":["a"]},{"required":["b"]}],` +
		`"properties":{"a":{"$ref":"#/$defs/p"},"b":{"type":"string"}}}}],"nextCursor":"x"}`)
	got, err := rawSchemas([]json.RawMessage{page})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got["move"])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"$defs":{"p":{"type":"string"}},"additionalProperties":false,"description":"Where.",` +
		`"oneOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{"$ref":"#/$defs/p"},"b":{"type":"string"}},"type":"object"}`
	if string(b) != want {
		t.Errorf("schema = %s\nwant %s", b, want)
	}
	if _, err := rawSchemas([]json.RawMessage{json.RawMessage(`[]`)}); err == nil {
		t.Error("a result that is not an object was read")
	}
}
