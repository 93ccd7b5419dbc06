package tcenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	importPath  = "ironcurtain.dev/e2e/internal/tcenv"
	stackPath   = "ironcurtain.dev/e2e/internal/stack"
	tcPrefix    = "github.com/testcontainers/testcontainers-go"
	helperCall  = "NoReaper"
	moduleDepth = 2 // e2e/internal/tcenv -> e2e
)

func TestNoReaper(t *testing.T) {
	tests := []struct {
		name  string
		set   bool
		value string
		want  string
	}{
		{name: "unset: turned off", want: "true"},
		{name: "set true: kept", set: true, value: "true", want: "true"},
		{name: "set false: the developer's choice is kept", set: true, value: "false", want: "false"},
		{name: "set empty: kept", set: true, value: "", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.set {
				t.Setenv(EnvRyuk, tc.value)
			} else {
				t.Setenv(EnvRyuk, "placeholder") // restored after the test
				if err := os.Unsetenv(EnvRyuk); err != nil {
					t.Fatal(err)
				}
			}
			NoReaper()
			if got, ok := os.LookupEnv(EnvRyuk); !ok || got != tc.want {
				t.Fatalf("%s = %q (set %v), want %q", EnvRyuk, got, ok, tc.want)
			}
		})
	}
}

// TestEveryTestMainSetsIt is the repo rule: every test package of the e2e
// module whose files import testcontainers or internal/stack has a TestMain
// that calls tcenv.NoReaper (plain `go test ./...` in e2e/ must not start
// the reaper, which needs a registry).
func TestEveryTestMainSetsIt(t *testing.T) {
	root, err := filepath.Abs(strings.Repeat("../", moduleDepth))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("e2e module root not found at %s: %v", root, err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		uses, tests, calls, err := scanDir(path)
		if err != nil {
			return err
		}
		if !uses || !tests {
			return nil
		}
		checked++
		rel, _ := filepath.Rel(root, path)
		if !calls {
			t.Errorf("e2e/%s: its tests use testcontainers but no TestMain calls tcenv.%s (plain `go test` would start the reaper, which needs a registry)", filepath.ToSlash(rel), helperCall)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 2 {
		t.Fatalf("only %d packages checked: the walk did not find the suite (root %s)", checked, root)
	}
}

// scanDir reports whether the package in dir imports testcontainers or the
// stack (any file), has test files, and has a TestMain calling NoReaper.
func scanDir(dir string) (uses, tests, calls bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, false, false, err
	}
	fset := token.NewFileSet()
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return false, false, false, err
		}
		local := ""
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(p, tcPrefix) || p == stackPath {
				uses = true
			}
			if p == importPath {
				local = "tcenv"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		if !strings.HasSuffix(name, "_test.go") {
			continue
		}
		tests = true
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != "TestMain" || fn.Body == nil || local == "" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == helperCall {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
							calls = true
						}
					}
				}
				return !calls
			})
		}
	}
	return uses, tests, calls, nil
}
