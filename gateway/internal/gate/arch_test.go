package gate

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// The import rules of the doors and the gate, read from `go list`: no door
// imports another door, only the MCP door imports mcp-go's server package,
// and the gate imports no door.
const (
	modulePath = "ironcurtain.dev/gateway"
	doorsPath  = modulePath + "/internal/doors/"
	gatePath   = modulePath + "/internal/gate"
	mcpDoor    = doorsPath + "mcphub"
	mcpServer  = "github.com/mark3labs/mcp-go/server"
)

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func TestArchitecture(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", modulePath+"/...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		n++
		for _, bad := range violations(p) {
			t.Error(bad)
		}
	}
	if n < 10 {
		t.Fatalf("go list named %d packages; the module was not read", n)
	}
}

// violations returns the rules p breaks, each naming the offending import.
func violations(p listedPackage) []string {
	var out []string
	own := door(p.ImportPath)
	for _, imp := range p.Imports {
		if d := door(imp); d != "" && own != "" && d != own {
			out = append(out, "door "+p.ImportPath+" imports another door: "+imp)
		}
		if imp == mcpServer && p.ImportPath != mcpDoor {
			out = append(out, p.ImportPath+" imports "+mcpServer+" (only "+mcpDoor+" may)")
		}
	}
	if p.ImportPath == gatePath || strings.HasPrefix(p.ImportPath, gatePath+"/") {
		for _, dep := range p.Deps {
			if door(dep) != "" {
				out = append(out, "the gate ("+p.ImportPath+") depends on a door: "+dep)
			}
		}
	}
	return out
}

// door returns the door a package belongs to ("githttp" for
// .../internal/doors/githttp/x), or "".
func door(path string) string {
	rest, ok := strings.CutPrefix(path, doorsPath)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

func TestArchitectureViolations(t *testing.T) {
	tests := []struct {
		name string
		p    listedPackage
		want int
	}{
		{name: "door imports door", p: listedPackage{ImportPath: doorsPath + "githttp", Imports: []string{doorsPath + "mcphub"}}, want: 1},
		{name: "door imports its own subpackage", p: listedPackage{ImportPath: doorsPath + "egress", Imports: []string{doorsPath + "egress/x"}}, want: 0},
		{name: "mcp-go server outside the MCP door", p: listedPackage{ImportPath: modulePath + "/internal/servers/external", Imports: []string{mcpServer}}, want: 1},
		{name: "mcp-go server in the MCP door", p: listedPackage{ImportPath: mcpDoor, Imports: []string{mcpServer}}, want: 0},
		{name: "gate depends on a door", p: listedPackage{ImportPath: gatePath, Deps: []string{doorsPath + "egress"}}, want: 1},
		{name: "door imports the gate", p: listedPackage{ImportPath: doorsPath + "githttp", Imports: []string{gatePath}}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := violations(tt.p); len(got) != tt.want {
				t.Fatalf("violations = %q, want %d", got, tt.want)
			}
		})
	}
}
