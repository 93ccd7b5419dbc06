package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/gateway/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) {
	if testenv.MaybeServeMCP() {
		return
	}
	os.Exit(m.Run())
}

const (
	incompleteAnnotations = `{"annotations":[{"toolName":"read_note","comment":"Reads a note.","args":{"path":["read-path"]}},{"toolName":"share_note","comment":"Shares a note.","args":{"path":["read-path"],"email":["email-address"]}}]}`
	goodAnnotations       = `{"annotations":[{"toolName":"read_note","comment":"Reads a note.","args":{"path":["read-path"]}},{"toolName":"share_note","comment":"Shares a note.","args":{"path":["read-path"],"email":{"default":["email-address"],"when":[{"condition":{"arg":"dryRun","equals":true},"roles":["email-address"]}]},"dryRun":["none"]}}]}`
)

// TestAnnotateToolsCommand starts a real stdio MCP server (this test binary),
// lists its tools with the SDK client, has the fake model annotate them (the
// first reply forgets an argument and is sent back), and merges the result
// into an existing tool-annotations.json. The server's environment holds no
// API key; a second run with an unchanged server asks the model nothing.
func TestAnnotateToolsCommand(t *testing.T) {
	dir := fixtureDir(t)
	out := filepath.Join(dir, "tool-annotations.json")
	dump := filepath.Join(t.TempDir(), "env")
	servers := filepath.Join(t.TempDir(), "mcp-servers.json")
	cfg := `{"mcpServers": {"notes": {"command": ` + quoteJSON(os.Args[0]) + `, "env": {"` + testenv.MCPServerEnv + `": "1", "` + testenv.EnvDumpVar + `": ` + quoteJSON(dump) + `}}}}`
	if err := os.WriteFile(servers, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var feedback string
	srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		if !strings.Contains(r.Last(), `tools of the "notes" MCP server`) && !strings.Contains(r.Last(), "failed validation") {
			return fakemodel.Answer{Status: 599}
		}
		if strings.Contains(r.Last(), "failed validation") {
			feedback = r.Last()
			return fakemodel.Answer{Text: goodAnnotations}
		}
		return fakemodel.Answer{Text: incompleteAnnotations}
	})
	defer srv.Close()
	args := []string{"annotate-tools", "--servers", servers, "--out", out, "--base-url", srv.AnthropicURL(), "--no-cache"}
	code, stdout, stderr := invoke(t, keyEnv(), args...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if srv.Calls() != 2 || !strings.Contains(feedback, `args.dryRun is missing`) {
		t.Errorf("calls %d, feedback %q", srv.Calls(), feedback)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(testenv.Dir(), "golden", "want", "annotate-tool-annotations.json")
	if *update {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if want, err := os.ReadFile(golden); err != nil || string(want) != string(b) {
		t.Errorf("tool-annotations.json differs from %s (run with -update to regenerate): %v", golden, err)
	}
	ann, err := policy.ParseAnnotations(out, b)
	if err != nil {
		t.Fatal(err)
	}
	notes := ann.Servers["notes"]
	if notes == nil || len(notes.Tools) != 2 || notes.InputHash == "" {
		t.Fatalf("notes annotations = %+v", notes)
	}
	share := notes.Tools[1]
	if share.Tool != "share_note" || share.Server != "notes" || len(share.InputSchema) == 0 || len(share.Args) != 3 {
		t.Errorf("share_note = %+v", share)
	}
	for _, kept := range []string{"filesystem", "git", "fetch"} {
		if ann.Servers[kept] == nil {
			t.Errorf("existing server %s was dropped", kept)
		}
	}
	envDump, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(envDump), "API_KEY") || strings.Contains(string(envDump), "test-key") {
		t.Errorf("the MCP server received the compiler's secrets:\n%s", envDump)
	}

	refuse := fakemodel.New(func(fakemodel.Request) fakemodel.Answer { return fakemodel.Answer{Status: 599} })
	defer refuse.Close()
	args[len(args)-2] = refuse.AnthropicURL()
	code, stdout, stderr = invoke(t, keyEnv(), args...)
	if code != exitOK || refuse.Calls() != 0 || !strings.Contains(stdout, "notes: 2 tools unchanged") {
		t.Fatalf("second run: exit %d, %d calls\n%s%s", code, refuse.Calls(), stdout, stderr)
	}
	b2, _ := os.ReadFile(out)
	if string(b2) != string(b) {
		t.Error("an unchanged server rewrote tool-annotations.json")
	}
}

func quoteJSON(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
