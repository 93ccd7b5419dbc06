package gate

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The import rules of the layers, read from `go list`. The layers are
//
//	cmd → cli | serve wiring → doors/* → gate → {policy, audit, escalation, servers} → {store, config} → leaves
//
// and the rules that keep the arrows pointing down:
//
//   - no door imports another door, and only the MCP door imports mcp-go's
//     server package;
//   - no package but a door, a command (cmd/..., where the serve wiring
//     lives) or the CLI (internal/cli/...) imports a door: not in its code,
//     and not in its tests unless testDoorImports names the exception;
//   - the gate depends on no door and no server implementation (of
//     internal/servers only the interface package), nor on the ops API,
//     the CLI or a command;
//   - the leaves (leafTrees) depend on none of that, and not on the gate or
//     internal/servers either.
//
// A violation names the offending import and, for a dependency, the chain
// of imports that leads to it. And, read from the source: the egress record
// has one constructor (audit.NewEgressEvent).
const (
	modulePath  = "ironcurtain.dev/gateway"
	doorsPath   = modulePath + "/internal/doors/"
	gatePath    = modulePath + "/internal/gate"
	serversPath = modulePath + "/internal/servers"
	mcpDoor     = doorsPath + "mcphub"
	mcpServer   = "github.com/mark3labs/mcp-go/server"
)

// doorImporters are the trees, besides the doors, whose code may import a
// door: the commands (cmd/ironcurtain holds the serve wiring) and the CLI.
var doorImporters = []string{modulePath + "/cmd", modulePath + "/internal/cli"}

// aboveGate are the trees above the gate: neither the gate nor anything
// below it may depend on them.
var aboveGate = []string{modulePath + "/internal/doors", modulePath + "/internal/ops", modulePath + "/internal/cli", modulePath + "/cmd"}

// leafTrees are the packages at the bottom: the pure policy, the public
// configuration and the small libraries (build info and the CLI glue among
// them), and the Guard every door and server dials through.
var leafTrees = []string{
	modulePath + "/policy", modulePath + "/config", modulePath + "/catalog",
	modulePath + "/netpolicy", modulePath + "/secretscan", modulePath + "/strictjson",
	modulePath + "/gitref", modulePath + "/gitexec", modulePath + "/gitremote",
	modulePath + "/buildinfo", modulePath + "/clikit",
	modulePath + "/internal/netguard",
}

// testDoorImports are the tests outside the doors that may import a door
// ("package door"), each an integration test that drives code through the
// door it is served by. Their code may not.
var testDoorImports = map[string]string{
	// hub_test.go, pin_test.go: an external server's tools, pins and
	// rug-pull refusal, called through the MCP door as the agent calls them.
	modulePath + "/internal/servers/external " + mcpDoor: "MCP door end to end",
	// probe_test.go: the production egress proxy runs inside a server's
	// container, to prove what the launcher's network lets through.
	modulePath + "/internal/launcher " + doorsPath + "egress": "egress proxy in a container",
	// modes_bench_test.go: a confined server's call timed through the MCP
	// door beside the same server called directly (issue 26's figures).
	modulePath + "/internal/launcher " + mcpDoor: "confined server through the MCP door",
	// The agent's end-to-end tests run the agent against the MCP door.
	modulePath + "/test/agente2e " + mcpDoor: "agent end to end",
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

// importGraph maps each package of the module to the packages its code
// imports, to name the chain that leads to a dependency.
type importGraph map[string][]string

func TestArchitecture(t *testing.T) {
	pkgs := listModule(t)
	g := importGraph{}
	for _, p := range pkgs {
		g[p.ImportPath] = p.Imports
	}
	for _, p := range pkgs {
		for _, bad := range violations(p, g) {
			t.Error(bad)
		}
	}
}

// listModule runs `go list` on every package of the module.
func listModule(t *testing.T) []listedPackage {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps,TestImports,XTestImports", modulePath+"/...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []listedPackage
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list named %d packages; the module was not read", len(pkgs))
	}
	return pkgs
}

// violations returns the rules p breaks, each naming the offending import
// (and for a dependency, the chain of imports from p to it).
func violations(p listedPackage, g importGraph) []string {
	var out []string
	for _, imp := range p.Imports {
		if msg := doorImport(p.ImportPath, imp, false); msg != "" {
			out = append(out, msg)
		}
		if imp == mcpServer && p.ImportPath != mcpDoor {
			out = append(out, p.ImportPath+" imports "+mcpServer+" (only "+mcpDoor+" may)")
		}
	}
	for _, imp := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
		if msg := doorImport(p.ImportPath, imp, true); msg != "" {
			out = append(out, msg)
		}
	}
	if under(p.ImportPath, gatePath) {
		out = append(out, forbiddenDeps(p, g, "the gate", gateMayNotUse)...)
	}
	if underAny(p.ImportPath, leafTrees) {
		out = append(out, forbiddenDeps(p, g, "the leaf", leafMayNotUse)...)
	}
	return out
}

// doorImport returns the rule broken by from importing imp (in its tests
// if test), or "".
func doorImport(from, imp string, test bool) string {
	d := door(imp)
	if d == "" {
		return ""
	}
	own := door(from)
	what := from + " imports"
	if test {
		what = "the tests of " + from + " import"
		if _, ok := testDoorImports[from+" "+imp]; ok {
			return ""
		}
	}
	switch {
	case own == d:
		return ""
	case own != "":
		return "door " + what + " another door: " + imp
	case underAny(from, doorImporters):
		return ""
	}
	return what + " the door " + imp + " (only the doors, cmd/ and internal/cli may)"
}

// gateMayNotUse says why the gate may not depend on dep ("" if it may): a
// door or anything else above the gate, or a server implementation (only
// the interface package internal/servers is below the gate).
func gateMayNotUse(dep string) string {
	switch {
	case door(dep) != "":
		return "a door"
	case underAny(dep, aboveGate):
		return "a package above the gate"
	case strings.HasPrefix(dep, serversPath+"/"):
		return "a server implementation"
	}
	return ""
}

// leafMayNotUse says why a leaf may not depend on dep ("" if it may): the
// gate, anything above it, or a server package.
func leafMayNotUse(dep string) string {
	switch {
	case under(dep, gatePath):
		return "the gate"
	case under(dep, serversPath):
		return "a server package"
	}
	return gateMayNotUse(dep)
}

// forbiddenDeps returns a violation for each dependency of p that
// forbidden refuses, naming the chain of imports that leads to it.
func forbiddenDeps(p listedPackage, g importGraph, role string, forbidden func(string) string) []string {
	var out []string
	for _, dep := range p.Deps {
		if why := forbidden(dep); why != "" {
			out = append(out, role+" "+p.ImportPath+" depends on "+why+", "+dep+": "+chain(g, p.ImportPath, dep))
		}
	}
	return out
}

// chain returns the shortest chain of imports in g from one package to
// another, as "a → b → c" with the module path left out.
func chain(g importGraph, from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for at := to; at != ""; at = prev[at] {
				path = append(path, strings.TrimPrefix(at, modulePath+"/"))
			}
			for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
				path[i], path[j] = path[j], path[i]
			}
			return strings.Join(path, " → ")
		}
		for _, next := range g[cur] {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return "(no chain of imports found)"
}

// under reports whether path is the package root or one below it.
func under(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

func underAny(path string, roots []string) bool {
	for _, r := range roots {
		if under(path, r) {
			return true
		}
	}
	return false
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
	const (
		egressDoor = doorsPath + "egress"
		fetch      = serversPath + "/fetch"
		policyPkg  = modulePath + "/policy"
		netguard   = modulePath + "/internal/netguard"
		audit      = modulePath + "/internal/audit"
	)
	g := importGraph{
		gatePath:  {audit, serversPath},
		audit:     {fetch},
		fetch:     {egressDoor},
		policyPkg: {audit},
	}
	tests := []struct {
		name string
		p    listedPackage
		want []string // substrings, one per violation
	}{
		{name: "door imports door", p: listedPackage{ImportPath: doorsPath + "githttp", Imports: []string{mcpDoor}}, want: []string{"another door: " + mcpDoor}},
		{name: "door imports its own subpackage", p: listedPackage{ImportPath: egressDoor, Imports: []string{egressDoor + "/x"}}},
		{name: "mcp-go server outside the MCP door", p: listedPackage{ImportPath: serversPath + "/external", Imports: []string{mcpServer}}, want: []string{mcpServer}},
		{name: "mcp-go server in the MCP door", p: listedPackage{ImportPath: mcpDoor, Imports: []string{mcpServer}}},
		{name: "door imports the gate", p: listedPackage{ImportPath: doorsPath + "githttp", Imports: []string{gatePath}}},
		{name: "server imports a door", p: listedPackage{ImportPath: fetch, Imports: []string{egressDoor}}, want: []string{fetch + " imports the door " + egressDoor}},
		{name: "serve wiring imports a door", p: listedPackage{ImportPath: modulePath + "/cmd/ironcurtain", Imports: []string{egressDoor}}},
		{name: "CLI imports a door", p: listedPackage{ImportPath: modulePath + "/internal/cli/opscli", Imports: []string{mcpDoor}}},
		{name: "a cmd-like name is not cmd", p: listedPackage{ImportPath: modulePath + "/cmdx", Imports: []string{mcpDoor}}, want: []string{"the door"}},
		{name: "tests of a server import a door", p: listedPackage{ImportPath: fetch, XTestImports: []string{egressDoor}}, want: []string{"the tests of " + fetch + " import the door"}},
		{name: "tests of a door import another door", p: listedPackage{ImportPath: egressDoor, TestImports: []string{mcpDoor}}, want: []string{"another door"}},
		{name: "allowed integration test", p: listedPackage{ImportPath: serversPath + "/external", XTestImports: []string{mcpDoor}}},
		{name: "exception is for tests only", p: listedPackage{ImportPath: serversPath + "/external", Imports: []string{mcpDoor}}, want: []string{"the door"}},
		{name: "gate depends on a door", p: listedPackage{ImportPath: gatePath, Deps: []string{audit, fetch, egressDoor}},
			want: []string{"on a server implementation", "on a door, " + egressDoor + ": internal/gate → internal/audit → internal/servers/fetch → internal/doors/egress"}},
		{name: "gate depends on the servers interface", p: listedPackage{ImportPath: gatePath, Deps: []string{serversPath}}},
		{name: "gate depends on the ops API", p: listedPackage{ImportPath: gatePath + "/x", Deps: []string{modulePath + "/internal/ops/opsapi"}}, want: []string{"above the gate, " + modulePath + "/internal/ops/opsapi: (no chain"}},
		{name: "leaf depends on the gate", p: listedPackage{ImportPath: policyPkg, Deps: []string{gatePath}}, want: []string{"the leaf " + policyPkg + " depends on the gate, " + gatePath}},
		{name: "leaf depends on a server", p: listedPackage{ImportPath: policyPkg, Deps: []string{audit, fetch, egressDoor}},
			want: []string{"a server package, " + fetch + ": policy → internal/audit → internal/servers/fetch", "a door, " + egressDoor + ": policy → internal/audit → internal/servers/fetch → internal/doors/egress"}},
		{name: "Guard depends on a door", p: listedPackage{ImportPath: netguard, Deps: []string{egressDoor}}, want: []string{"the leaf " + netguard}},
		{name: "leaf test helper depends on the gate", p: listedPackage{ImportPath: netguard + "/netguardtest", Deps: []string{gatePath}}, want: []string{"the leaf"}},
		{name: "leaf depends on another leaf", p: listedPackage{ImportPath: netguard, Deps: []string{modulePath + "/netpolicy"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(tt.p, g)
			if len(got) != len(tt.want) {
				t.Fatalf("violations = %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// egressConstructor is the one file whose non-test code may build an
// audit.EgressEvent itself (a composite literal or new).
const egressConstructor = "internal/audit/egress.go"

func TestOneEgressConstructor(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(b), "module "+modulePath+"\n") {
		t.Fatalf("%s is not the root of %s (%v)", root, modulePath, err)
	}
	var found []string
	files := 0
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, at := range egressLiterals(fset, f) {
			found = append(found, filepath.ToSlash(rel)+":"+at)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the module's source: %v", err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files; the module was not read", files)
	}
	var others []string
	own := 0
	for _, at := range found {
		if strings.HasPrefix(at, egressConstructor+":") {
			own++
		} else {
			others = append(others, at)
		}
	}
	if len(others) > 0 {
		t.Errorf("audit.EgressEvent built outside its constructor (use audit.NewEgressEvent or servers.NewEgressEvent): %s", strings.Join(others, ", "))
	}
	if own != 1 {
		t.Errorf("%s builds audit.EgressEvent %d times, want once (the constructor)", egressConstructor, own)
	}
}

// egressLiterals returns the line:column of each place f builds an
// EgressEvent itself: a composite literal (EgressEvent{...},
// audit.EgressEvent{...}, an element of []*audit.EgressEvent{{...}}) or
// new(EgressEvent).
func egressLiterals(fset *token.FileSet, f *ast.File) []string {
	var out []string
	at := func(n ast.Node) {
		p := fset.Position(n.Pos())
		out = append(out, strconv.Itoa(p.Line)+":"+strconv.Itoa(p.Column))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if isEgressEvent(n.Type) {
				at(n)
			}
			if isEgressEvent(elemType(n.Type)) {
				for _, e := range n.Elts {
					if lit := elidedLit(e); lit != nil {
						at(lit)
					}
				}
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 && isEgressEvent(n.Args[0]) {
				at(n)
			}
		}
		return true
	})
	return out
}

// isEgressEvent reports whether e names the type EgressEvent (or a pointer
// to it).
func isEgressEvent(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "EgressEvent"
	case *ast.SelectorExpr:
		return e.Sel.Name == "EgressEvent"
	case *ast.ParenExpr:
		return isEgressEvent(e.X)
	case *ast.StarExpr:
		return isEgressEvent(e.X)
	}
	return false
}

// elemType is the element type of an array, slice or map type (else nil).
func elemType(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case *ast.ArrayType:
		return e.Elt
	case *ast.MapType:
		return e.Value
	}
	return nil
}

// elidedLit is the element literal with its type left out ({...}, also
// as a map value); nil for anything else.
func elidedLit(e ast.Expr) *ast.CompositeLit {
	if kv, ok := e.(*ast.KeyValueExpr); ok {
		e = kv.Value
	}
	if lit, ok := e.(*ast.CompositeLit); ok && lit.Type == nil {
		return lit
	}
	return nil
}

func TestEgressLiterals(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{name: "constructor call", src: "func f() { _ = audit.NewEgressEvent(audit.EgressFields{}) }", want: 0},
		{name: "pointer literal", src: "func f() { _ = &audit.EgressEvent{ID: \"x\"} }", want: 1},
		{name: "value literal in the package", src: "func f() { _ = EgressEvent{} }", want: 1},
		{name: "new", src: "func f() { _ = new(audit.EgressEvent) }", want: 1},
		{name: "slice of literals", src: "func f() { _ = []*audit.EgressEvent{{ID: \"x\"}, {}} }", want: 2},
		{name: "map of literals", src: "func f() { _ = map[string]audit.EgressEvent{\"a\": {}} }", want: 1},
		{name: "slice of constructed records", src: "func f() { _ = []*audit.EgressEvent{audit.NewEgressEvent(audit.EgressFields{})} }", want: 0},
		{name: "other type", src: "func f() { _ = audit.LLMCall{} }", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", "package p\n"+tt.src+"\n", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := egressLiterals(fset, f); len(got) != tt.want {
				t.Fatalf("egressLiterals = %q, want %d", got, tt.want)
			}
		})
	}
}
