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

// The import rules of the doors and the gate, read from `go list`: no door
// imports another door, only the MCP door imports mcp-go's server package,
// and the gate imports no door. And, read from the source: the egress
// record has one constructor (audit.NewEgressEvent).
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
