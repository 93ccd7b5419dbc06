package filesystem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithin(t *testing.T) {
	cases := []struct {
		name, root, p string
		rel           string
		ok            bool
	}{
		{name: "equal", root: "/sb", p: "/sb", rel: ".", ok: true},
		{name: "child", root: "/sb", p: "/sb/a/b", rel: "a/b", ok: true},
		{name: "prefix sibling", root: "/sb", p: "/sb2/a", ok: false},
		{name: "prefix dash", root: "/sb", p: "/sb-evil", ok: false},
		{name: "parent", root: "/sb", p: "/", ok: false},
		{name: "root slash", root: "/", p: "/etc", rel: "etc", ok: true},
		{name: "root slash itself", root: "/", p: "/", rel: ".", ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rel, ok := within(tc.root, tc.p)
			if ok != tc.ok || rel != tc.rel {
				t.Fatalf("within(%q, %q) = %q, %v; want %q, %v", tc.root, tc.p, rel, ok, tc.rel, tc.ok)
			}
		})
	}
}

// FuzzResolve: whatever the raw path, an accepted one maps to a relative
// path without ".." or control characters that joins back to the input,
// and lies inside the root by a separator boundary.
func FuzzResolve(f *testing.F) {
	root := f.TempDir()
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(Config{Root: real})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	for _, s := range []string{real, real + "/a", real + "/../x", real + "2/a", real + "/a\x00/../../x",
		"/etc/passwd", "a", real + "/./a", real + "/a/", real + "/\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := srv.resolve(p)
		if err != nil {
			if msg := safeMessage(err); len(p) > 8 && strings.Contains(msg, p) && !strings.HasPrefix(p, real+"/") {
				t.Fatalf("refusal echoes the raw path: %q", msg)
			}
			return
		}
		if p != real && !strings.HasPrefix(p, real+"/") {
			t.Fatalf("accepted %q outside %q", p, real)
		}
		for _, seg := range strings.Split(rel, "/") {
			if seg == ".." || (seg == "." && rel != ".") || seg == "" {
				t.Fatalf("bad segment in %q", rel)
			}
		}
		if checkText(rel) != nil {
			t.Fatalf("control characters survived: %q", rel)
		}
		if srv.display(rel) != p {
			t.Fatalf("display(%q) = %q, want %q", rel, srv.display(rel), p)
		}
	})
}

func TestApplyEdits(t *testing.T) {
	cases := []struct {
		name    string
		content string
		edits   []edit
		want    string
		wantErr string
	}{
		{name: "first occurrence only", content: "a a a", edits: []edit{{oldText: "a", newText: "b"}}, want: "b a a"},
		{name: "dollar signs are literal", content: "x", edits: []edit{{oldText: "x", newText: "$&$1"}}, want: "$&$1"},
		{name: "loose keeps file indentation", content: "\t\tfoo()\n\t\tbar()\n",
			edits: []edit{{oldText: "foo()\nbar()", newText: "baz()\nqux()"}}, want: "\t\tbaz()\nqux()\n"},
		{name: "loose relative indent", content: "  if a {\n    b()\n  }\n",
			edits: []edit{{oldText: "if a {\n  b()\n}", newText: "if a {\n    b()\n    c()\n}"}},
			want:  "  if a {\n    b()\n    c()\n}\n"},
		{name: "second edit fails", content: "abc", edits: []edit{{oldText: "a", newText: "x"}, {oldText: "a", newText: "y"}},
			wantErr: "edits[1]"},
		{name: "delete text", content: "keep drop keep", edits: []edit{{oldText: " drop", newText: ""}}, want: "keep keep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := applyEdits(tc.content, tc.edits)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(safeMessage(err), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzApplyEdits(f *testing.F) {
	f.Add("a\n  b\nc\n", "b\nc", "x\n y")
	f.Add("abc", "b", "")
	f.Add("\r\n\r\n", "\n", "\r\n")
	f.Fuzz(func(t *testing.T, content, old, repl string) {
		if len(content) > 1<<14 {
			return
		}
		content = normalizeNewlines(content)
		got, err := applyEdits(content, []edit{{oldText: old, newText: repl}})
		if err != nil {
			return
		}
		o := normalizeNewlines(old)
		if strings.Contains(content, o) && got != strings.Replace(content, o, normalizeNewlines(repl), 1) {
			t.Fatalf("exact edit misapplied: %q", got)
		}
		// An identity edit of an exact substring changes nothing.
		if strings.Contains(content, o) {
			same, err := applyEdits(content, []edit{{oldText: old, newText: old}})
			if err != nil || same != content {
				t.Fatalf("identity edit changed the content: %q, %v", same, err)
			}
		}
	})
}

func BenchmarkResolve(b *testing.B) {
	e := newEnv(b)
	p := e.in("src/internal/servers/filesystem/filesystem.go")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.srv.resolve(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadTextFile(b *testing.B) {
	e := newEnv(b)
	mustWrite(b, e.in("f.go"), strings.Repeat("package main // some line of code\n", 100))
	args := map[string]any{"path": e.in("f.go")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.srv.Call(ctx, "read_text_file", args)
		if err != nil || res.IsError {
			b.Fatal(err, text(res))
		}
	}
}

func BenchmarkWriteFile(b *testing.B) {
	e := newEnv(b)
	args := map[string]any{"path": e.in("f.go"), "content": strings.Repeat("package main // some line of code\n", 100)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.srv.Call(ctx, "write_file", args)
		if err != nil || res.IsError {
			b.Fatal(err, text(res))
		}
	}
}

func BenchmarkSearchFiles(b *testing.B) {
	e := newEnv(b)
	for d := 0; d < 20; d++ {
		dir := e.in(fmt.Sprintf("pkg%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 50; f++ {
			mustWrite(b, filepath.Join(dir, fmt.Sprintf("f%d.go", f)), "")
		}
	}
	args := map[string]any{"path": e.sandbox, "pattern": "**/f1*.go"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.srv.Call(ctx, "search_files", args)
		if err != nil || res.IsError {
			b.Fatal(err, text(res))
		}
	}
}
