package githubrelay

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestRequestsDecodedOnlyStrictly is a repository rule: the relay reads
// what the agent sends only through strictjson. encoding/json's decoders
// (case-insensitive names, last duplicate wins, trailing data ignored by
// a Decoder) may read only GitHub's own answers, in the functions listed.
func TestRequestsDecodedOnlyStrictly(t *testing.T) {
	allowed := map[string]bool{"resolveNode": true} // GitHub's answer to the relay's node lookup
	checkNoLooseJSON(t, ".", allowed)
}

// checkNoLooseJSON fails for a call of encoding/json's Unmarshal or
// NewDecoder in the package's non-test files outside the allowed functions,
// and for any read of a request's query through URL.Query().
func checkNoLooseJSON(t *testing.T, dir string, allowed map[string]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		jsonName := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"encoding/json"` {
				jsonName = "json"
				if imp.Name != nil {
					jsonName = imp.Name.Name
				}
			}
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || allowed[fn.Name.Name] {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == jsonName && (sel.Sel.Name == "Unmarshal" || sel.Sel.Name == "NewDecoder") {
					t.Errorf("%s: %s calls encoding/json's %s: decode what a client sends with strictjson", fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "URL" && sel.Sel.Name == "Query" {
					t.Errorf("%s: %s reads URL.Query(), which drops malformed pairs and keeps every repeat: parse the query once, strictly", fset.Position(sel.Pos()), fn.Name.Name)
				}
				return true
			})
		}
	}
}
