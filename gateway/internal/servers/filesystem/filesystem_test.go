package filesystem

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

// toolCase is one call and what must come back.
type toolCase struct {
	name    string
	tool    string
	args    func(e *env) map[string]any
	setup   func(t *testing.T, e *env)
	wantErr string                                 // substring of the tool error; "" = success
	want    func(t *testing.T, e *env, out string) // checks on success
}

func runToolCases(t *testing.T, cases []toolCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			res := e.call(t, tc.tool, tc.args(e))
			out := text(res)
			if tc.wantErr != "" {
				if !res.IsError || !strings.Contains(out, tc.wantErr) {
					t.Fatalf("got IsError=%v %q, want error containing %q", res.IsError, out, tc.wantErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("unexpected tool error: %q", out)
			}
			if tc.want != nil {
				tc.want(t, e, out)
			}
		})
	}
}

func equals(want string) func(*testing.T, *env, string) {
	return func(t *testing.T, _ *env, out string) {
		t.Helper()
		if out != want {
			t.Fatalf("got %q, want %q", out, want)
		}
	}
}

func fileIs(rel, want string) func(*testing.T, *env, string) {
	return func(t *testing.T, e *env, _ string) {
		t.Helper()
		if got := mustRead(t, e.in(rel)); got != want {
			t.Fatalf("%s = %q, want %q", rel, got, want)
		}
	}
}

func writeIn(rel, content string) func(*testing.T, *env) {
	return func(t *testing.T, e *env) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(e.in(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, e.in(rel), content)
	}
}

func TestReadTextFile(t *testing.T) {
	p := func(rel string, extra ...any) func(e *env) map[string]any {
		return func(e *env) map[string]any {
			m := map[string]any{"path": e.in(rel)}
			for i := 0; i+1 < len(extra); i += 2 {
				m[extra[i].(string)] = extra[i+1]
			}
			return m
		}
	}
	lines := "one\ntwo\r\nthree\nfour\n"
	runToolCases(t, []toolCase{
		{name: "whole file", tool: "read_text_file", setup: writeIn("a.txt", lines), args: p("a.txt"), want: equals(lines)},
		{name: "deprecated read_file", tool: "read_file", setup: writeIn("a.txt", "x"), args: p("a.txt"), want: equals("x")},
		{name: "empty file", tool: "read_text_file", setup: writeIn("e", ""), args: p("e"), want: equals("")},
		{name: "head 2", tool: "read_text_file", setup: writeIn("a.txt", lines), args: p("a.txt", "head", 2.0), want: equals("one\ntwo")},
		{name: "head beyond end", tool: "read_text_file", setup: writeIn("a.txt", "x\ny"), args: p("a.txt", "head", 10.0), want: equals("x\ny")},
		{name: "tail 2", tool: "read_text_file", setup: writeIn("a.txt", lines), args: p("a.txt", "tail", 2.0), want: equals("three\nfour")},
		{name: "tail crlf", tool: "read_text_file", setup: writeIn("a.txt", lines), args: p("a.txt", "tail", 3.0), want: equals("two\nthree\nfour")},
		{name: "tail without final newline", tool: "read_text_file", setup: writeIn("a.txt", "a\nb\nc"), args: p("a.txt", "tail", 1.0), want: equals("c")},
		{name: "tail of empty", tool: "read_text_file", setup: writeIn("a.txt", ""), args: p("a.txt", "tail", 3.0), want: equals("")},
		{name: "head zero means whole", tool: "read_text_file", setup: writeIn("a.txt", "a\nb"), args: p("a.txt", "head", 0.0), want: equals("a\nb")},
		{name: "head and tail", tool: "read_text_file", setup: writeIn("a.txt", lines), args: p("a.txt", "head", 1.0, "tail", 1.0), wantErr: "both head and tail"},
		{name: "missing", tool: "read_text_file", args: p("nope"), wantErr: "reading file: no such file or directory"},
		{name: "directory", tool: "read_text_file", setup: writeIn("d/x", ""), args: p("d"), wantErr: "is a directory"},
		{name: "nested", tool: "read_text_file", setup: writeIn("a/b/c.txt", "deep"), args: p("a/b/c.txt"), want: equals("deep")},
		{name: "unicode name", tool: "read_text_file", setup: writeIn("ünï cødé.txt", "u"), args: p("ünï cødé.txt"), want: equals("u")},
	})
}

func TestTailLinesAcrossChunks(t *testing.T) {
	e := newEnv(t)
	var sb strings.Builder
	for i := 0; i < 50000; i++ {
		sb.WriteString("line ")
		sb.WriteString(strings.Repeat("x", i%7))
		sb.WriteString("\n")
	}
	mustWrite(t, e.in("big"), sb.String())
	all := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	for _, n := range []int{1, 100, 20000} {
		res := e.call(t, "read_text_file", map[string]any{"path": e.in("big"), "tail": float64(n)})
		if want := strings.Join(all[len(all)-n:], "\n"); text(res) != want {
			t.Fatalf("tail %d: got %d bytes, want %d", n, len(text(res)), len(want))
		}
	}
}

func TestReadMediaFile(t *testing.T) {
	png := "\x89PNG\r\n\x1a\nfake"
	runToolCases(t, []toolCase{
		{name: "png", tool: "read_media_file", setup: writeIn("i.PNG", png),
			args: func(e *env) map[string]any { return map[string]any{"path": e.in("i.PNG")} }},
		{name: "audio", tool: "read_media_file", setup: writeIn("s.mp3", "ID3"),
			args: func(e *env) map[string]any { return map[string]any{"path": e.in("s.mp3")} }},
		{name: "not media", tool: "read_media_file", setup: writeIn("x.txt", "x"),
			args:    func(e *env) map[string]any { return map[string]any{"path": e.in("x.txt")} },
			wantErr: "not an image or audio file"},
	})
	e := newEnv(t)
	mustWrite(t, e.in("i.png"), png)
	res := e.call(t, "read_media_file", map[string]any{"path": e.in("i.png")})
	if len(res.Content) != 1 || res.Content[0].Type != "image" || res.Content[0].MIMEType != "image/png" ||
		res.Content[0].Data != base64.StdEncoding.EncodeToString([]byte(png)) {
		t.Fatalf("unexpected content: %+v", res.Content)
	}
	mustWrite(t, e.in("s.ogg"), "OggS")
	res = e.call(t, "read_media_file", map[string]any{"path": e.in("s.ogg")})
	if res.Content[0].Type != "audio" || res.Content[0].MIMEType != "audio/ogg" {
		t.Fatalf("unexpected content: %+v", res.Content)
	}
}

func TestReadMultipleFiles(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e.in("a"), "A")
	mustWrite(t, e.in("b"), "B")
	res := e.call(t, "read_multiple_files", map[string]any{"paths": []any{e.in("a"), e.in("missing"), e.in("b"), "/etc/passwd"}})
	want := e.in("a") + ":\nA\n" +
		"\n---\n" + e.in("missing") + ": Error - reading file: no such file or directory" +
		"\n---\n" + e.in("b") + ":\nB\n" +
		"\n---\npaths[3]: Error - access denied: path is outside the sandbox"
	if text(res) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", text(res), want)
	}
	if res := e.call(t, "read_multiple_files", map[string]any{"paths": []any{}}); !res.IsError {
		t.Fatal("empty paths accepted")
	}
	many := make([]any, maxMultipleFiles+1)
	for i := range many {
		many[i] = e.in("a")
	}
	if res := e.call(t, "read_multiple_files", map[string]any{"paths": many}); !res.IsError {
		t.Fatal("too many paths accepted")
	}
}

func TestWriteFile(t *testing.T) {
	w := func(rel, content string) func(e *env) map[string]any {
		return func(e *env) map[string]any { return map[string]any{"path": e.in(rel), "content": content} }
	}
	runToolCases(t, []toolCase{
		{name: "new file", tool: "write_file", args: w("n.txt", "hello"), want: fileIs("n.txt", "hello")},
		{name: "overwrite", tool: "write_file", setup: writeIn("o.txt", "old content"), args: w("o.txt", "new"), want: fileIs("o.txt", "new")},
		{name: "empty content", tool: "write_file", setup: writeIn("o.txt", "x"), args: w("o.txt", ""), want: fileIs("o.txt", "")},
		{name: "NUL in content is data", tool: "write_file", args: w("bin", "a\x00b"), want: fileIs("bin", "a\x00b")},
		{name: "missing parent", tool: "write_file", args: w("no/such/dir/f", "x"), wantErr: "parent directory does not exist"},
		{name: "onto a directory", tool: "write_file", setup: writeIn("d/f", ""), args: w("d", "x"), wantErr: "is a directory"},
		{name: "message", tool: "write_file", args: w("m", "x"), want: func(t *testing.T, e *env, out string) {
			if out != "Successfully wrote to "+e.in("m") {
				t.Fatalf("got %q", out)
			}
		}},
	})
	t.Run("keeps permissions and leaves no temp files", func(t *testing.T) {
		e := newEnv(t)
		mustWrite(t, e.in("x.sh"), "#!/bin/sh\n")
		if err := os.Chmod(e.in("x.sh"), 0o750); err != nil {
			t.Fatal(err)
		}
		if res := e.call(t, "write_file", map[string]any{"path": e.in("x.sh"), "content": "#!/bin/sh\necho\n"}); res.IsError {
			t.Fatal(text(res))
		}
		fi, err := os.Stat(e.in("x.sh"))
		if err != nil || fi.Mode().Perm() != 0o750 {
			t.Fatalf("mode = %v, %v", fi.Mode(), err)
		}
		ents, _ := os.ReadDir(e.sandbox)
		for _, en := range ents {
			if strings.HasPrefix(en.Name(), ".ironcurtain-") {
				t.Fatalf("temporary file left behind: %s", en.Name())
			}
		}
	})
}

func TestEditFile(t *testing.T) {
	ed := func(rel string, dry bool, pairs ...string) func(e *env) map[string]any {
		return func(e *env) map[string]any {
			edits := []any{}
			for i := 0; i+1 < len(pairs); i += 2 {
				edits = append(edits, map[string]any{"oldText": pairs[i], "newText": pairs[i+1]})
			}
			m := map[string]any{"path": e.in(rel), "edits": edits}
			if dry {
				m["dryRun"] = true
			}
			return m
		}
	}
	src := "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"
	runToolCases(t, []toolCase{
		{name: "exact replace", tool: "edit_file", setup: writeIn("m.go", src), args: ed("m.go", false, `"hi"`, `"bye"`),
			want: func(t *testing.T, e *env, out string) {
				fileIs("m.go", strings.Replace(src, `"hi"`, `"bye"`, 1))(t, e, out)
				wantDiff := "```diff\nIndex: " + e.in("m.go") + "\n" +
					"===================================================================\n" +
					"--- " + e.in("m.go") + "\toriginal\n" +
					"+++ " + e.in("m.go") + "\tmodified\n" +
					"@@ -1,5 +1,5 @@\n package main\n \n func main() {\n-\tprintln(\"hi\")\n+\tprintln(\"bye\")\n }\n```\n\n"
				if out != wantDiff {
					t.Fatalf("diff:\n%s\nwant:\n%s", out, wantDiff)
				}
			}},
		{name: "dry run leaves the file", tool: "edit_file", setup: writeIn("m.go", src), args: ed("m.go", true, "main()", "run()"),
			want: func(t *testing.T, e *env, out string) {
				fileIs("m.go", src)(t, e, out)
				if !strings.Contains(out, "-func main() {\n+func run() {\n") {
					t.Fatalf("diff: %s", out)
				}
			}},
		{name: "sequential edits", tool: "edit_file", setup: writeIn("f", "a b c"), args: ed("f", false, "a", "x", "x b", "y"), want: fileIs("f", "y c")},
		{name: "whitespace-flexible lines", tool: "edit_file", setup: writeIn("f", "if x {\n    a()\n    b()\n}\n"),
			args: ed("f", false, "a()\n  b()", "c()\n  d()"), want: fileIs("f", "if x {\n    c()\n    d()\n}\n")},
		{name: "crlf file", tool: "edit_file", setup: writeIn("f", "a\r\nb\r\n"), args: ed("f", false, "a\r\nb", "c"), want: fileIs("f", "c\n")},
		{name: "no match", tool: "edit_file", setup: writeIn("f", "abc"), args: ed("f", false, "zzz", "y"), wantErr: "edits[0]: could not find a match"},
		{name: "empty oldText", tool: "edit_file", setup: writeIn("f", "abc"), args: ed("f", false, "", "y"), wantErr: "oldText is empty"},
		{name: "no edits", tool: "edit_file", setup: writeIn("f", "abc"), args: ed("f", false), wantErr: "at least one edit"},
		{name: "missing file", tool: "edit_file", args: ed("nope", false, "a", "b"), wantErr: "no such file"},
		{name: "backticks in content", tool: "edit_file", setup: writeIn("f", "```\n"), args: ed("f", true, "```", "````"),
			want: func(t *testing.T, _ *env, out string) {
				if !strings.HasPrefix(out, "`````diff\n") {
					t.Fatalf("fence: %q", out)
				}
			}},
	})
}

func TestCreateDirectory(t *testing.T) {
	d := func(rel string) func(e *env) map[string]any {
		return func(e *env) map[string]any { return map[string]any{"path": e.in(rel)} }
	}
	isDir := func(rel string) func(*testing.T, *env, string) {
		return func(t *testing.T, e *env, _ string) {
			if fi, err := os.Stat(e.in(rel)); err != nil || !fi.IsDir() {
				t.Fatalf("%s is not a directory: %v", rel, err)
			}
		}
	}
	runToolCases(t, []toolCase{
		{name: "new", tool: "create_directory", args: d("n"), want: isDir("n")},
		{name: "nested", tool: "create_directory", args: d("a/b/c"), want: isDir("a/b/c")},
		{name: "existing", tool: "create_directory", setup: writeIn("e/f", ""), args: d("e"), want: isDir("e")},
		{name: "sandbox itself", tool: "create_directory", args: func(e *env) map[string]any { return map[string]any{"path": e.sandbox} }},
		{name: "over a file", tool: "create_directory", setup: writeIn("f", ""), args: d("f"), wantErr: "creating directory"},
	})
}

func TestListDirectory(t *testing.T) {
	setup := func(t *testing.T, e *env) {
		writeIn("b.txt", "12345")(t, e)
		writeIn("a/x", "")(t, e)
		writeIn("c/y", strings.Repeat("z", 2048))(t, e)
		if err := os.Symlink("b.txt", e.in("link")); err != nil {
			t.Fatal(err)
		}
	}
	d := func(rel string, extra ...string) func(e *env) map[string]any {
		return func(e *env) map[string]any {
			m := map[string]any{"path": e.in(rel)}
			if len(extra) == 2 {
				m[extra[0]] = extra[1]
			}
			return m
		}
	}
	runToolCases(t, []toolCase{
		{name: "list", tool: "list_directory", setup: setup, args: d("."),
			want: equals("[DIR] a\n[FILE] b.txt\n[DIR] c\n[FILE] link\n[FILE] movable")},
		{name: "list a file", tool: "list_directory", setup: setup, args: d("b.txt"), wantErr: "not a directory"},
		{name: "sizes by name", tool: "list_directory_with_sizes", setup: setup, args: d("c"),
			want: equals("[FILE] y                                 2.00 KB\n\nTotal: 1 files, 0 directories\nCombined size: 2.00 KB")},
		{name: "sizes by size", tool: "list_directory_with_sizes", setup: setup, args: d(".", "sortBy", "size"),
			want: func(t *testing.T, _ *env, out string) {
				lines := strings.Split(out, "\n")
				if !strings.HasPrefix(lines[0], "[DIR] a") && !strings.HasPrefix(lines[0], "[DIR] c") {
					t.Fatalf("largest first expected: %q", out)
				}
				if !strings.Contains(out, "Total: 3 files, 2 directories") {
					t.Fatalf("summary: %q", out)
				}
			}},
	})
}

func TestDirectoryTree(t *testing.T) {
	setup := func(t *testing.T, e *env) {
		writeIn("src/main.go", "")(t, e)
		writeIn("src/util/u.go", "")(t, e)
		writeIn("node_modules/x/index.js", "")(t, e)
		writeIn("src/node_modules/y.js", "")(t, e)
		writeIn(".git/HEAD", "")(t, e)
		if err := os.MkdirAll(e.in("empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(e.in("movable")); err != nil {
			t.Fatal(err)
		}
	}
	tree := func(ex ...any) func(e *env) map[string]any {
		return func(e *env) map[string]any { return map[string]any{"path": e.sandbox, "excludePatterns": ex} }
	}
	names := func(out string) []string {
		var entries []treeEntry
		if err := json.Unmarshal([]byte(out), &entries); err != nil {
			panic(err)
		}
		var walk func(prefix string, es []treeEntry) []string
		walk = func(prefix string, es []treeEntry) []string {
			var r []string
			for _, en := range es {
				p := prefix + en.Name
				if en.Type == "directory" {
					p += "/"
					if en.Children == nil {
						panic("directory without children array")
					}
					r = append(r, p)
					r = append(r, walk(p, *en.Children)...)
				} else {
					if en.Children != nil {
						panic("file with children")
					}
					r = append(r, p)
				}
			}
			return r
		}
		return walk("", entries)
	}
	expect := func(want ...string) func(*testing.T, *env, string) {
		return func(t *testing.T, _ *env, out string) {
			if got := strings.Join(names(out), " "); got != strings.Join(want, " ") {
				t.Fatalf("got  %s\nwant %s", got, strings.Join(want, " "))
			}
		}
	}
	runToolCases(t, []toolCase{
		{name: "all", tool: "directory_tree", setup: setup, args: tree(), want: expect(
			".git/", ".git/HEAD", "empty/", "node_modules/", "node_modules/x/", "node_modules/x/index.js",
			"src/", "src/main.go", "src/node_modules/", "src/node_modules/y.js", "src/util/", "src/util/u.go")},
		{name: "plain name excluded at any depth", tool: "directory_tree", setup: setup, args: tree("node_modules", ".git"),
			want: expect("empty/", "src/", "src/main.go", "src/util/", "src/util/u.go")},
		{name: "glob exclude", tool: "directory_tree", setup: setup, args: tree("**/*.go"),
			want: expect(".git/", ".git/HEAD", "empty/", "node_modules/", "node_modules/x/", "node_modules/x/index.js",
				"src/", "src/node_modules/", "src/node_modules/y.js", "src/util/")},
		{name: "format", tool: "directory_tree", setup: writeIn("d/f", ""),
			args: func(e *env) map[string]any { return map[string]any{"path": e.in("d")} },
			want: equals("[\n  {\n    \"name\": \"f\",\n    \"type\": \"file\"\n  }\n]")},
	})
}

func TestSearchFiles(t *testing.T) {
	setup := func(t *testing.T, e *env) {
		writeIn("main.go", "")(t, e)
		writeIn("README.md", "")(t, e)
		writeIn("pkg/a.go", "")(t, e)
		writeIn("pkg/a_test.go", "")(t, e)
		writeIn("pkg/.hidden.go", "")(t, e)
		writeIn("vendor/v.go", "")(t, e)
	}
	search := func(pattern string, ex ...any) func(e *env) map[string]any {
		return func(e *env) map[string]any {
			return map[string]any{"path": e.sandbox, "pattern": pattern, "excludePatterns": ex}
		}
	}
	expect := func(rels ...string) func(*testing.T, *env, string) {
		return func(t *testing.T, e *env, out string) {
			var want []string
			for _, r := range rels {
				want = append(want, e.in(r))
			}
			if out != strings.Join(want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
			}
		}
	}
	runToolCases(t, []toolCase{
		{name: "top level only", tool: "search_files", setup: setup, args: search("*.go"), want: expect("main.go")},
		{name: "any depth", tool: "search_files", setup: setup, args: search("**/*.go"),
			want: expect("main.go", "pkg/.hidden.go", "pkg/a.go", "pkg/a_test.go", "vendor/v.go")},
		{name: "exclude dir", tool: "search_files", setup: setup, args: search("**/*.go", "vendor", "**/*_test.go"),
			want: expect("main.go", "pkg/.hidden.go", "pkg/a.go")},
		{name: "braces", tool: "search_files", setup: setup, args: search("**/*.{md,mod}"), want: expect("README.md")},
		{name: "directory match", tool: "search_files", setup: setup, args: search("pkg"), want: expect("pkg")},
		{name: "no match", tool: "search_files", setup: setup, args: search("*.rs"), want: equals("No matches found")},
	})
}

func TestGetFileInfo(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e.in("f"), "12345")
	if err := os.Chmod(e.in("f"), 0o640); err != nil {
		t.Fatal(err)
	}
	out := text(e.call(t, "get_file_info", map[string]any{"path": e.in("f")}))
	for _, want := range []string{"size: 5\n", "modified: ", "accessed: ", "isDirectory: false\n", "isFile: true\n", "permissions: 640"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in %q", want, out)
		}
	}
	out = text(e.call(t, "get_file_info", map[string]any{"path": e.sandbox}))
	if !strings.Contains(out, "isDirectory: true") {
		t.Fatalf("directory info: %q", out)
	}
}

func TestListAllowedDirectories(t *testing.T) {
	e := newEnv(t)
	if got := text(e.call(t, "list_allowed_directories", map[string]any{})); got != "Allowed directories:\n"+e.sandbox {
		t.Fatalf("got %q", got)
	}
	if got := text(e.call(t, "list_allowed_directories", nil)); got != "Allowed directories:\n"+e.sandbox {
		t.Fatalf("nil args: %q", got)
	}
}

// TestRootThroughSymlink: a sandbox configured through a symlink is used
// by its realpath, the form the policy engine hands over.
func TestRootThroughSymlink(t *testing.T) {
	e := newEnv(t)
	link := filepath.Join(filepath.Dir(e.sandbox), "sandbox-link")
	if err := os.Symlink(e.sandbox, link); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Root: link})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.Root() != e.sandbox {
		t.Fatalf("Root() = %q, want %q", srv.Root(), e.sandbox)
	}
	res, _ := srv.Call(context.Background(), "read_text_file", map[string]any{"path": filepath.Join(link, "movable")})
	if !res.IsError {
		t.Fatal("path through the configured symlink should not be canonical")
	}
}

func TestNewConfigErrors(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "file"), "")
	for _, tc := range []struct {
		name string
		root string
		want string
	}{
		{name: "empty", root: "", want: "Root is empty"},
		{name: "relative", root: "sandbox", want: "not absolute"},
		{name: "missing", root: filepath.Join(dir, "nope"), want: "resolving filesystem sandbox"},
		{name: "file", root: filepath.Join(dir, "file"), want: "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{Root: tc.root})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	_, err := New(Config{Root: filepath.Join(dir, "nope")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error does not wrap the cause: %v", err)
	}
}

// TestAnnotations pins the policy roles of every tool (the shipped policy is
// written against them) and checks that every declared argument is in the
// schema and annotated.
func TestAnnotations(t *testing.T) {
	e := newEnv(t)
	roles := func(ann policy.ToolAnnotation) map[string]string {
		m := map[string]string{}
		for _, a := range ann.Args {
			var rs []string
			for _, r := range a.Spec.Default {
				rs = append(rs, string(r))
			}
			s := strings.Join(rs, ",")
			for _, w := range a.Spec.When {
				var wr []string
				for _, r := range w.Roles {
					wr = append(wr, string(r))
				}
				s += " when " + w.Condition.Arg + "=" + jsonString(w.Condition.Equals) + " -> " + strings.Join(wr, ",")
			}
			m[a.Name] = s
		}
		return m
	}
	want := map[string]map[string]string{
		"read_text_file":            {"path": "read-path", "head": "none", "tail": "none"},
		"read_file":                 {"path": "read-path", "head": "none", "tail": "none"},
		"read_media_file":           {"path": "read-path"},
		"read_multiple_files":       {"paths": "read-path"},
		"write_file":                {"path": "write-path", "content": "none"},
		"edit_file":                 {"path": "read-path,write-path when dryRun=true -> read-path", "edits": "none", "dryRun": "none"},
		"create_directory":          {"path": "write-path"},
		"list_directory":            {"path": "read-path"},
		"list_directory_with_sizes": {"path": "read-path", "sortBy": "none"},
		"directory_tree":            {"path": "read-path", "excludePatterns": "none"},
		"move_file":                 {"source": "read-path,delete-path", "destination": "write-path"},
		"search_files":              {"path": "read-path", "pattern": "none", "excludePatterns": "none"},
		"get_file_info":             {"path": "read-path"},
		"list_allowed_directories":  {},
	}
	tools := e.srv.Tools()
	if len(tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(tools), len(want))
	}
	for _, tool := range tools {
		t.Run(tool.Name, func(t *testing.T) {
			w, ok := want[tool.Name]
			if !ok {
				t.Fatalf("unexpected tool")
			}
			got := roles(tool.Annotation)
			if len(got) != len(w) {
				t.Fatalf("roles %v, want %v", got, w)
			}
			for k, v := range w {
				if got[k] != v {
					t.Fatalf("%s: roles %q, want %q", k, got[k], v)
				}
			}
			if tool.Annotation.Tool != tool.Name || tool.Annotation.Server != "filesystem" {
				t.Fatalf("annotation names %q/%q", tool.Annotation.Server, tool.Annotation.Tool)
			}
			var schema struct {
				Type                 string                     `json:"type"`
				Properties           map[string]json.RawMessage `json:"properties"`
				AdditionalProperties bool                       `json:"additionalProperties"`
			}
			if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
				t.Fatal(err)
			}
			if schema.Type != "object" || schema.AdditionalProperties || len(schema.Properties) != len(w) {
				t.Fatalf("schema %s", tool.InputSchema)
			}
			for k := range w {
				if _, ok := schema.Properties[k]; !ok {
					t.Fatalf("schema lacks %q", k)
				}
			}
		})
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
