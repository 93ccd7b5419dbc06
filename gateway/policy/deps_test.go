package policy

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// depsAllowed are the only packages outside the standard library the
// policy package may depend on: pure helpers with no I/O. An entry ending
// in "/..." allows the package and everything below it.
var depsAllowed = []string{
	"ironcurtain.dev/gateway/gitref",
	"ironcurtain.dev/gateway/netpolicy",
	"ironcurtain.dev/gateway/secretscan",
	"ironcurtain.dev/gateway/strictjson",
	"github.com/go-json-experiment/json/...",
	"golang.org/x/net/idna",
	"golang.org/x/text/...",
}

// depsBanned are standard library packages the policy package must not
// depend on: it runs no process, opens no connection and reaches no
// database (I/O such as git comes in through RemoteResolver).
var depsBanned = []string{"os/exec", "net", "net/http/...", "database/sql/..."}

func matchesDep(pkg string, patterns []string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if pkg == base || strings.HasPrefix(pkg, base+"/") {
				return true
			}
		} else if pkg == p {
			return true
		}
	}
	return false
}

type listedPackage struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

// TestPurePackage is a repository rule: the policy package (which the
// compiler imports to verify rules) depends on the standard library minus
// os/exec, net, net/http and database/sql, and on the pure helpers in
// depsAllowed; nothing of the gateway's internal packages, HTTP, the
// database or MCP. A failure names the package and the import chain that
// brings it in.
func TestPurePackage(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not available")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Standard,Imports", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listedPackage{}
	var root string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		pkgs[p.ImportPath] = p
		root = p.ImportPath // -deps lists the package itself last
	}
	if root != "ironcurtain.dev/gateway/policy" {
		t.Fatalf("go list listed %q last, want the policy package", root)
	}
	for path, p := range pkgs {
		if path == root {
			continue
		}
		var why string
		switch {
		case strings.Contains(path, "/internal/") && strings.HasPrefix(path, "ironcurtain.dev/"):
			why = "an internal package of the gateway"
		case p.Standard && matchesDep(path, depsBanned):
			why = "a banned standard library package"
		case !p.Standard && !matchesDep(path, depsAllowed):
			why = "not in the allowlist"
		default:
			continue
		}
		t.Errorf("gateway/policy depends on %s (%s): %s", path, why, strings.Join(importChain(pkgs, root, path), " → "))
	}
}

// importChain returns a shortest import path from root to target.
func importChain(pkgs map[string]listedPackage, root, target string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == target {
			var chain []string
			for p := target; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, imp := range pkgs[cur].Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return []string{root, "…", target}
}
