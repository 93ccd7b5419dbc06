package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// TestToolsPinCatalogServer: the tools of a server configured with
// catalog: are pinned with the catalog's reviewed annotations (the reference
// servers ship none), and only what was pinned lands in the file.
func TestToolsPinCatalogServer(t *testing.T) {
	cfgPath, annPath := pinFixture(t)
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, []byte("  clock:\n    catalog: time@unpinned\n    command: /usr/local/bin/mcp-server-time\n")...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	listed := servers.Tool{Name: "get_current_time", Description: "Get current time in a specific timezones",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}`)}
	var out bytes.Buffer
	e := Env{Args: []string{"--config", cfgPath, "--server", "clock", "--yes"}, Getenv: func(string) string { return "" },
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out}
	if code := toolsPin(context.Background(), e, fakeLister(listed)); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	b, err := os.ReadFile(annPath)
	if err != nil {
		t.Fatal(err)
	}
	ann, err := policy.ParseAnnotations(filepath.Base(annPath), b)
	if err != nil {
		t.Fatal(err)
	}
	sa := ann.Servers["clock"]
	if sa == nil || len(sa.Tools) != 1 || sa.Tools[0].Tool != "get_current_time" {
		t.Fatalf("clock in the file = %+v; want only the pinned get_current_time\n%s", sa, out.String())
	}
	got := sa.Tools[0]
	if _, ok := got.Arg("timezone"); !ok || got.Pin == nil {
		t.Fatalf("pinned entry lacks the catalog's roles or the pin: %+v", got)
	}
	def := policy.ToolDefinition{Name: listed.Name, Description: listed.Description, InputSchema: listed.InputSchema}
	if !policy.CheckPin(got, def).OK {
		t.Fatal("the new pin does not match what the server lists")
	}
	if ann.Servers["notes"] == nil {
		t.Fatal("the other server's entries were lost")
	}
}
