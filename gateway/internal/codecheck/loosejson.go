// Package codecheck holds repository rules that tests enforce by reading a
// package's own source: what a door may not call on input it has not
// judged. It is used only from tests.
package codecheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// LooseJSON reports, for the non-test Go files in dir, each call of
// encoding/json's Unmarshal or NewDecoder outside the functions allowed
// names (case-insensitive names, last duplicate wins and ignored trailing
// data make them unfit for what a client sends: decode that with
// strictjson), and each read of a request's query through URL.Query()
// (which drops malformed pairs and keeps every repeat). Each finding names
// the position and the function; an error means dir could not be read.
func LooseJSON(dir string, allowed map[string]bool) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("codecheck: %w", err)
		}
		jsonName := importName(f, "encoding/json", "json")
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || allowed[fn.Name.Name] {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if msg := looseCall(n, jsonName); msg != "" {
					out = append(out, fmt.Sprintf("%s: %s %s", fset.Position(n.Pos()), fn.Name.Name, msg))
				}
				return true
			})
		}
	}
	return out, nil
}

// importName is the name file f uses for the package at path ("" when it
// does not import it).
func importName(f *ast.File, path, def string) string {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"`+path+`"` {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return def
		}
	}
	return ""
}

// looseCall says what is wrong with node n, or "".
func looseCall(n ast.Node, jsonName string) string {
	sel, ok := n.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); ok && jsonName != "" && id.Name == jsonName && (sel.Sel.Name == "Unmarshal" || sel.Sel.Name == "NewDecoder") {
		return "calls encoding/json's " + sel.Sel.Name + ": decode what a client sends with strictjson"
	}
	if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "URL" && sel.Sel.Name == "Query" {
		return "reads URL.Query(), which drops malformed pairs and keeps every repeat: parse the query once, strictly"
	}
	return ""
}
