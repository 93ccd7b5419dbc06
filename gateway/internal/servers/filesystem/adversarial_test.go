package filesystem

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Every tool that takes a path, with the path argument to poison.
var pathTools = []struct {
	tool string
	args func(e *env, p string) map[string]any
}{
	{tool: "read_text_file", args: func(e *env, p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "read_file", args: func(e *env, p string) map[string]any { return map[string]any{"path": p, "head": 1.0} }},
	{tool: "read_media_file", args: func(e *env, p string) map[string]any { return map[string]any{"path": p + ".png"} }},
	{tool: "read_multiple_files", args: func(e *env, p string) map[string]any { return map[string]any{"paths": []any{p}} }},
	{tool: "write_file", args: func(e *env, p string) map[string]any { return map[string]any{"path": p, "content": "pwned"} }},
	{tool: "edit_file", args: func(e *env, p string) map[string]any {
		return map[string]any{"path": p, "edits": []any{map[string]any{"oldText": "SECRET", "newText": "pwned"}}}
	}},
	{tool: "create_directory", args: func(e *env, p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "list_directory", args: func(e *env, p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "list_directory_with_sizes", args: func(e *env, p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "directory_tree", args: func(e *env, p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "search_files", args: func(e *env, p string) map[string]any { return map[string]any{"path": p, "pattern": "**"} }},
	{tool: "get_file_info", args: func(e *env, p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "move_file", args: func(e *env, p string) map[string]any { return map[string]any{"source": p, "destination": p + "-moved"} }},
	{tool: "move_file", args: func(e *env, p string) map[string]any {
		return map[string]any{"source": e.in("movable"), "destination": p}
	}},
}

// TestPathsOutsideTheSandbox: traversal, absolute paths outside, the
// "/sandbox2" string-prefix trick (CVE-2025-53110), relative paths, NUL and
// control characters. Every tool must refuse, nothing outside may change,
// and the refusal must not echo a host path outside the sandbox.
func TestPathsOutsideTheSandbox(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e.in("a.txt"), "inside")
	if err := os.Mkdir(e.in("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		path string
	}{
		{name: "dotdot traversal", path: e.sandbox + "/../outside/secret"},
		{name: "dotdot in the middle", path: e.sandbox + "/sub/../../outside/secret"},
		{name: "dotdot to the parent", path: e.sandbox + "/.."},
		{name: "absolute outside", path: filepath.Join(e.outside, "secret")},
		{name: "etc passwd", path: "/etc/passwd"},
		{name: "filesystem root", path: "/"},
		{name: "prefix trick sandbox2", path: filepath.Join(e.sandbox2, "secret")},
		{name: "prefix trick sandbox-evil", path: e.sandbox + "-evil/secret"},
		{name: "relative", path: "a.txt"},
		{name: "relative dotdot", path: "../outside/secret"},
		{name: "tilde", path: "~/secret"},
		{name: "trailing slash", path: e.sandbox + "/sub/"},
		{name: "double slash", path: e.sandbox + "//a.txt"},
		{name: "dot segment", path: e.sandbox + "/./a.txt"},
		{name: "NUL then traversal", path: e.sandbox + "/a.txt\x00/../../outside/secret"},
		{name: "NUL at end", path: e.sandbox + "/a.txt\x00"},
		{name: "newline", path: e.sandbox + "/a\n.txt"},
		{name: "carriage return", path: e.sandbox + "/a\r.txt"},
		{name: "tab", path: e.sandbox + "/a\t.txt"},
		{name: "escape", path: e.sandbox + "/a\x1b[2J.txt"},
		{name: "DEL", path: e.sandbox + "/a\x7f.txt"},
		{name: "C1 control", path: e.sandbox + "/a\u0085.txt"},
		{name: "invalid UTF-8", path: e.sandbox + "/a\xff.txt"},
		{name: "empty", path: ""},
	}
	for _, tc := range bad {
		for _, pt := range pathTools {
			t.Run(tc.name+"/"+pt.tool, func(t *testing.T) {
				res := e.call(t, pt.tool, pt.args(e, tc.path))
				msg := text(res)
				if pt.tool == "read_multiple_files" {
					// Per-file failures are reported inline.
					if !strings.Contains(msg, "Error - ") {
						t.Fatalf("expected an inline error, got %q", msg)
					}
				} else if !res.IsError {
					t.Fatalf("expected a tool error, got %q", msg)
				}
				if strings.Contains(msg, secret) {
					t.Fatalf("secret leaked: %q", msg)
				}
				if strings.Contains(msg, e.outside) || strings.Contains(msg, e.sandbox2) || strings.Contains(msg, "/etc") {
					t.Fatalf("error names a host path outside the sandbox: %q", msg)
				}
				e.assertOutsideIntact(t)
			})
		}
	}
}

// TestSymlinkEscapes: a directory symlink and leaf symlinks (to an existing
// file and dangling) pointing outside. The policy engine would have resolved
// them, but a path the engine saw before a symlink was planted, or a
// planted intermediate symlink, must still fail closed.
func TestSymlinkEscapes(t *testing.T) {
	e := newEnv(t)
	links := map[string]string{
		"dirlink":  e.outside,                               // directory symlink
		"leaf":     filepath.Join(e.outside, "secret"),      // leaf to an existing file
		"dangling": filepath.Join(e.outside, "created"),     // dangling leaf
		"rel":      "../outside/secret",                     // relative leaf
		"reldir":   "../outside",                            // relative directory
		"abs-in":   filepath.Join(e.sandbox, "inside.txt"),  // absolute, pointing inside
		"sib":      filepath.Join(e.sandbox2, "secret"),     // prefix sibling
		"dangdir":  filepath.Join(e.outside, "newdir", "x"), // dangling through a missing dir
	}
	mustWrite(t, e.in("inside.txt"), "inside")
	for name, target := range links {
		if err := os.Symlink(target, e.in(name)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{
		"dirlink/secret", "dirlink/new", "leaf", "dangling", "rel", "reldir/secret",
		"sib", "dangdir", "abs-in",
	}
	for _, p := range paths {
		for _, pt := range pathTools {
			if pt.tool == "list_directory" || pt.tool == "list_directory_with_sizes" ||
				pt.tool == "directory_tree" || pt.tool == "search_files" {
				continue // covered below on the link itself
			}
			t.Run(p+"/"+pt.tool, func(t *testing.T) {
				res := e.call(t, pt.tool, pt.args(e, e.in(p)))
				msg := text(res)
				if strings.Contains(msg, secret) {
					t.Fatalf("secret leaked: %q", msg)
				}
				// Moving a leaf symlink moves the link itself, which is
				// harmless; everything else must be refused.
				harmless := pt.tool == "move_file" && !strings.Contains(p, "/")
				if pt.tool != "read_multiple_files" && !harmless && !res.IsError {
					t.Fatalf("expected refusal, got %q", msg)
				}
				e.assertOutsideIntact(t)
				if exists(filepath.Join(e.outside, "created")) || exists(filepath.Join(e.outside, "newdir")) {
					t.Fatal("a file was created outside through a dangling symlink")
				}
			})
		}
	}
	for _, dir := range []string{"dirlink", "reldir"} {
		for _, tool := range []string{"list_directory", "list_directory_with_sizes", "directory_tree"} {
			t.Run(dir+"/"+tool, func(t *testing.T) {
				res := e.call(t, tool, map[string]any{"path": e.in(dir)})
				if !res.IsError || strings.Contains(text(res), "secret") {
					t.Fatalf("listing through a directory symlink: %q", text(res))
				}
			})
		}
		t.Run(dir+"/search_files", func(t *testing.T) {
			res := e.call(t, "search_files", map[string]any{"path": e.in(dir), "pattern": "**"})
			if !res.IsError {
				t.Fatalf("searching through a directory symlink: %q", text(res))
			}
		})
	}
	// Walking the sandbox lists the links but never descends into them.
	for _, tool := range []string{"directory_tree", "search_files"} {
		t.Run("walk/"+tool, func(t *testing.T) {
			args := map[string]any{"path": e.sandbox}
			if tool == "search_files" {
				args["pattern"] = "**/secret"
			}
			res := e.call(t, tool, args)
			if res.IsError {
				t.Fatalf("walk failed: %q", text(res))
			}
			if strings.Contains(text(res), "secret") {
				t.Fatalf("walk followed a symlink out: %q", text(res))
			}
		})
	}
	// get_file_info and list sizes use lstat: the size of the outside
	// file is not disclosed.
	res := e.call(t, "list_directory_with_sizes", map[string]any{"path": e.sandbox})
	if strings.Contains(text(res), formatSize(int64(len(secret)))) {
		t.Fatalf("size of the symlink target disclosed: %q", text(res))
	}
}

// TestSymlinkSwapRace swaps the written leaf between a regular file and a
// symlink to a file outside (existing and dangling) while write_file and
// edit_file run. Whatever the interleaving, nothing outside may change.
func TestSymlinkSwapRace(t *testing.T) {
	e := newEnv(t)
	target := e.in("target")
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		outs := []string{filepath.Join(e.outside, "secret"), filepath.Join(e.outside, "created")}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := e.in(".swap")
			_ = os.Remove(tmp)
			if i%2 == 0 {
				_ = os.WriteFile(tmp, []byte("SECRET inside"), 0o644)
			} else {
				_ = os.Symlink(outs[(i/2)%2], tmp)
			}
			_ = os.Rename(tmp, target) // atomic swap of the leaf
			swaps.Add(1)
		}
	}()
	wrote := 0
	for i := 0; i < iters; i++ {
		var res = e.call(t, "write_file", map[string]any{"path": target, "content": "pwned"})
		if !res.IsError {
			wrote++
		}
		e.call(t, "edit_file", map[string]any{"path": target,
			"edits": []any{map[string]any{"oldText": "SECRET", "newText": "pwned"}}})
		r := e.call(t, "read_text_file", map[string]any{"path": target})
		if strings.Contains(text(r), secret) {
			t.Fatalf("read through a swapped symlink returned the outside secret")
		}
	}
	close(stop)
	wg.Wait()
	e.assertOutsideIntact(t)
	if exists(filepath.Join(e.outside, "created")) {
		t.Fatal("write created a file outside through a dangling symlink")
	}
	t.Logf("%d iterations, %d swaps, %d writes succeeded", iters, swaps.Load(), wrote)
}

// TestCheckUseSwap stages the race deterministically: right after the
// server has checked the path (and before it opens or renames), the leaf or
// its parent directory is replaced by a symlink pointing outside.
func TestCheckUseSwap(t *testing.T) {
	swaps := []struct {
		name string
		swap func(e *env)
	}{
		{name: "leaf to existing outside file", swap: func(e *env) {
			_ = os.Remove(e.in("d/f"))
			_ = os.Symlink(filepath.Join(e.outside, "secret"), e.in("d/f"))
		}},
		{name: "leaf to dangling outside path", swap: func(e *env) {
			_ = os.Remove(e.in("d/f"))
			_ = os.Symlink(filepath.Join(e.outside, "created"), e.in("d/f"))
		}},
		{name: "leaf to hard link of outside file", swap: func(e *env) {
			_ = os.Remove(e.in("d/f"))
			_ = os.Link(filepath.Join(e.outside, "secret"), e.in("d/f"))
		}},
		{name: "leaf to FIFO", swap: func(e *env) {
			_ = os.Remove(e.in("d/f"))
			_ = syscall.Mkfifo(e.in("d/f"), 0o644)
		}},
		{name: "parent to outside dir", swap: func(e *env) {
			_ = os.Rename(e.in("d"), e.in("d.old"))
			_ = os.Symlink(e.outside, e.in("d"))
		}},
	}
	tools := []struct {
		tool string
		args func(e *env) map[string]any
	}{
		{tool: "write_file", args: func(e *env) map[string]any { return map[string]any{"path": e.in("d/f"), "content": "pwned"} }},
		{tool: "edit_file", args: func(e *env) map[string]any {
			return map[string]any{"path": e.in("d/f"), "edits": []any{map[string]any{"oldText": "orig", "newText": "pwned"}}}
		}},
		{tool: "read_text_file", args: func(e *env) map[string]any { return map[string]any{"path": e.in("d/f")} }},
		{tool: "list_directory", args: func(e *env) map[string]any { return map[string]any{"path": e.in("d")} }},
	}
	for _, sw := range swaps {
		for _, tl := range tools {
			// nth picks which check the swap follows: edit_file checks
			// twice (read, then write).
			for _, nth := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%s/check%d", sw.name, tl.tool, nth), func(t *testing.T) {
					e := newEnv(t)
					if err := os.Mkdir(e.in("d"), 0o755); err != nil {
						t.Fatal(err)
					}
					mustWrite(t, e.in("d/f"), "orig")
					var n atomic.Int32
					testHookAfterCheck = func(string) {
						if int(n.Add(1)) == nth {
							sw.swap(e)
						}
					}
					defer func() { testHookAfterCheck = nil }()
					done := make(chan string, 1)
					go func() { done <- text(e.call(t, tl.tool, tl.args(e))) }()
					var out string
					select {
					case out = <-done:
					case <-time.After(10 * time.Second):
						t.Fatal("call hung")
					}
					if strings.Contains(out, secret) {
						t.Fatalf("outside content leaked: %q", out)
					}
					t.Logf("result: %.80q", out)
					e.assertOutsideIntact(t)
					if exists(filepath.Join(e.outside, "created")) {
						t.Fatal("file created outside through a dangling symlink")
					}
				})
			}
		}
	}
}

// TestDirectorySwapRace swaps an intermediate directory for a symlink to an
// outside directory while files beneath it are written, read and created.
func TestDirectorySwapRace(t *testing.T) {
	e := newEnv(t)
	dir := e.in("dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "secret"), "inside")
	iters := 1000
	if testing.Short() {
		iters = 100
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				_ = os.Rename(dir, e.in("dir.real"))
				_ = os.Symlink(e.outside, dir)
			} else {
				_ = os.Remove(dir)
				_ = os.Rename(e.in("dir.real"), dir)
			}
		}
	}()
	for i := 0; i < iters; i++ {
		e.call(t, "write_file", map[string]any{"path": filepath.Join(dir, "new"), "content": "pwned"})
		e.call(t, "create_directory", map[string]any{"path": filepath.Join(dir, "newdir")})
		r := e.call(t, "read_text_file", map[string]any{"path": filepath.Join(dir, "secret")})
		if strings.Contains(text(r), secret) {
			t.Fatal("read through a swapped directory returned the outside secret")
		}
		e.call(t, "list_directory", map[string]any{"path": dir})
		if !exists(e.in("movable")) {
			mustWrite(t, e.in("movable"), "m")
		}
		e.call(t, "move_file", map[string]any{"source": e.in("movable"), "destination": filepath.Join(dir, "moved")})
	}
	close(stop)
	wg.Wait()
	for _, n := range []string{"new", "newdir", "moved"} {
		if exists(filepath.Join(e.outside, n)) {
			t.Fatalf("%s was created outside the sandbox through a swapped directory", n)
		}
	}
	e.assertOutsideIntact(t)
}

// TestHardLinkToOutsideFile: a hard link passes os.Root (same inode as a
// file outside). Writes and edits through it are refused; moving the name
// leaves the outside file alone.
func TestHardLinkToOutsideFile(t *testing.T) {
	e := newEnv(t)
	hl := e.in("hl")
	if err := os.Link(filepath.Join(e.outside, "secret"), hl); err != nil {
		t.Skipf("hard links unsupported here: %v", err)
	}
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{name: "write", tool: "write_file", args: map[string]any{"path": hl, "content": "pwned"}},
		{name: "edit", tool: "edit_file", args: map[string]any{"path": hl,
			"edits": []any{map[string]any{"oldText": "SECRET", "newText": "pwned"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.call(t, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(text(res), "hard links") {
				t.Fatalf("write through a hard link not refused: %q", text(res))
			}
			e.assertOutsideIntact(t)
		})
	}
	t.Run("dry run is a read", func(t *testing.T) {
		res := e.call(t, "edit_file", map[string]any{"path": hl, "dryRun": true,
			"edits": []any{map[string]any{"oldText": "SECRET", "newText": "x"}}})
		if res.IsError {
			t.Fatalf("dry run refused: %q", text(res))
		}
		e.assertOutsideIntact(t)
	})
	t.Run("move the name", func(t *testing.T) {
		res := e.call(t, "move_file", map[string]any{"source": hl, "destination": e.in("hl2")})
		if res.IsError {
			t.Fatalf("move refused: %q", text(res))
		}
		e.assertOutsideIntact(t)
	})
}

// TestNoDeleteThroughDirectorySymlink: os.RemoveAll through an intermediate
// directory symlink deletes outside files. The server's only removals are
// renames (move_file) and the cleanup of its own temporary files, all via
// the root: moving or replacing through a directory symlink must fail and
// leave the outside intact; moving the symlink moves the link only.
func TestNoDeleteThroughDirectorySymlink(t *testing.T) {
	e := newEnv(t)
	if err := os.Symlink(e.outside, e.in("link")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, e.in("f"), "inside")
	cases := []struct {
		name        string
		source, dst string
		wantErr     bool
	}{
		{name: "move an outside file in", source: e.in("link/secret"), dst: e.in("stolen"), wantErr: true},
		{name: "move a file out", source: e.in("f"), dst: e.in("link/f"), wantErr: true},
		{name: "overwrite outside", source: e.in("f"), dst: e.in("link/secret"), wantErr: true},
		{name: "move the link itself", source: e.in("link"), dst: e.in("link2"), wantErr: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := e.call(t, "move_file", map[string]any{"source": tc.source, "destination": tc.dst})
			if res.IsError != tc.wantErr {
				t.Fatalf("IsError = %v, want %v: %q", res.IsError, tc.wantErr, text(res))
			}
			e.assertOutsideIntact(t)
		})
	}
	if fi, err := os.Lstat(e.in("link2")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link itself should have moved: %v", err)
	}
}

// TestFIFODoesNotHang: opening a FIFO for reading blocks until a writer
// appears; the server opens non-blocking and refuses non-regular files.
func TestFIFODoesNotHang(t *testing.T) {
	e := newEnv(t)
	if err := syscall.Mkfifo(e.in("fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan string, 1)
	go func() {
		var out []string
		for _, tool := range []string{"read_text_file", "read_media_file", "write_file", "get_file_info"} {
			args := map[string]any{"path": e.in("fifo")}
			if tool == "write_file" {
				args["content"] = "x"
			}
			if tool == "read_media_file" {
				continue
			}
			res := e.call(t, tool, args)
			out = append(out, tool+":"+text(res))
		}
		done <- strings.Join(out, "\n")
	}()
	select {
	case out := <-done:
		if !strings.Contains(out, "read_text_file:reading file: not a regular file") {
			t.Fatalf("unexpected results:\n%s", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO hung the server")
	}
}

// TestCraftedNamesCannotForgeListings: a file name holding a newline would
// add a fake line to a listing; it is quoted instead.
func TestCraftedNamesCannotForgeListings(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e.in("evil\n[DIR] fake"), "x")
	for _, tool := range []string{"list_directory", "list_directory_with_sizes"} {
		res := e.call(t, tool, map[string]any{"path": e.sandbox})
		for _, line := range strings.Split(text(res), "\n") {
			if strings.HasPrefix(line, "[DIR] fake") {
				t.Fatalf("%s: forged line in %q", tool, text(res))
			}
		}
	}
	res := e.call(t, "search_files", map[string]any{"path": e.sandbox, "pattern": "evil*"})
	if strings.Count(text(res), "\n") != 0 {
		t.Fatalf("search result spans lines: %q", text(res))
	}
}

// TestStrictArguments: unknown keys, wrong types and out-of-range numbers
// are refused before anything is touched.
func TestStrictArguments(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e.in("a.txt"), "a\nb\n")
	cases := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{name: "unknown key", tool: "read_text_file", args: map[string]any{"path": e.in("a.txt"), "follow": true}, want: `unknown argument "follow"`},
		{name: "smuggled second path", tool: "write_file", args: map[string]any{"path": e.in("b"), "content": "x", "file": "/etc/passwd"}, want: "unknown argument"},
		{name: "missing path", tool: "read_text_file", args: map[string]any{}, want: `missing argument "path"`},
		{name: "path not a string", tool: "read_text_file", args: map[string]any{"path": []any{e.in("a.txt")}}, want: "must be a string"},
		{name: "paths not strings", tool: "read_multiple_files", args: map[string]any{"paths": []any{1.0}}, want: "array of strings"},
		{name: "negative head", tool: "read_text_file", args: map[string]any{"path": e.in("a.txt"), "head": -1.0}, want: "non-negative integer"},
		{name: "fractional tail", tool: "read_text_file", args: map[string]any{"path": e.in("a.txt"), "tail": 1.5}, want: "non-negative integer"},
		{name: "huge head", tool: "read_text_file", args: map[string]any{"path": e.in("a.txt"), "head": 1e300}, want: "non-negative integer"},
		{name: "dryRun string", tool: "edit_file", args: map[string]any{"path": e.in("a.txt"), "edits": []any{}, "dryRun": "true"}, want: "must be a boolean"},
		{name: "edit extra field", tool: "edit_file", args: map[string]any{"path": e.in("a.txt"),
			"edits": []any{map[string]any{"oldText": "a", "newText": "b", "path": "/etc/passwd"}}}, want: "unknown field"},
		{name: "unknown tool", tool: "delete_file", args: map[string]any{"path": e.in("a.txt")}, want: "unknown tool"},
		{name: "arguments on list_allowed_directories", tool: "list_allowed_directories", args: map[string]any{"path": "/"}, want: "unknown argument"},
		{name: "bad sortBy", tool: "list_directory_with_sizes", args: map[string]any{"path": e.sandbox, "sortBy": "mtime"}, want: "sortBy"},
		{name: "bad glob", tool: "search_files", args: map[string]any{"path": e.sandbox, "pattern": "[a"}, want: "invalid pattern"},
		{name: "NUL in pattern", tool: "search_files", args: map[string]any{"path": e.sandbox, "pattern": "a\x00"}, want: "invalid pattern"},
		{name: "brace bomb", tool: "search_files", args: map[string]any{"path": e.sandbox, "pattern": strings.Repeat("{a,b}", 12)}, want: "brace alternatives"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := e.call(t, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("got IsError=%v %q, want error containing %q", res.IsError, text(res), tc.want)
			}
		})
	}
	if got := mustRead(t, e.in("a.txt")); got != "a\nb\n" {
		t.Fatalf("file changed: %q", got)
	}
}

// TestSandboxRootItself: the sandbox may be listed but not replaced or moved.
func TestSandboxRootItself(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{name: "write over the root", tool: "write_file", args: map[string]any{"path": e.sandbox, "content": "x"}},
		{name: "move the root", tool: "move_file", args: map[string]any{"source": e.sandbox, "destination": e.in("x")}},
		{name: "move onto the root", tool: "move_file", args: map[string]any{"source": e.in("x"), "destination": e.sandbox}},
		{name: "read the root as a file", tool: "read_text_file", args: map[string]any{"path": e.sandbox}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := e.call(t, tc.tool, tc.args); !res.IsError {
				t.Fatalf("not refused: %q", text(res))
			}
			if fi, err := os.Stat(e.sandbox); err != nil || !fi.IsDir() {
				t.Fatal("sandbox damaged")
			}
		})
	}
}

// TestSizeCaps: reads and writes beyond the limits are refused without
// reading the whole file.
func TestSizeCaps(t *testing.T) {
	e := newEnv(t)
	srv, err := New(Config{Root: e.sandbox, MaxReadBytes: 1024, MaxWriteBytes: 1024, MaxEntries: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	e.srv = srv
	mustWrite(t, e.in("big.txt"), strings.Repeat("x\n", 4096))
	mustWrite(t, e.in("big.png"), strings.Repeat("x", 4096))
	if err := os.MkdirAll(e.in("many"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 11; i++ {
		mustWrite(t, e.in("many/"+string(rune('a'+i))), "")
	}
	cases := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{name: "text read", tool: "read_text_file", args: map[string]any{"path": e.in("big.txt")}, want: "too large"},
		{name: "media read", tool: "read_media_file", args: map[string]any{"path": e.in("big.png")}, want: "too large"},
		{name: "head too much", tool: "read_text_file", args: map[string]any{"path": e.in("big.txt"), "head": 4000.0}, want: "read limit"},
		{name: "tail too much", tool: "read_text_file", args: map[string]any{"path": e.in("big.txt"), "tail": 4000.0}, want: "read limit"},
		{name: "write", tool: "write_file", args: map[string]any{"path": e.in("w"), "content": strings.Repeat("y", 2048)}, want: "too large"},
		{name: "many entries", tool: "list_directory", args: map[string]any{"path": e.in("many")}, want: "more than 10 entries"},
		{name: "tree", tool: "directory_tree", args: map[string]any{"path": e.sandbox}, want: "more than 10 entries"},
		{name: "multi budget", tool: "read_multiple_files", args: map[string]any{"paths": []any{e.in("big.txt")}}, want: "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := e.call(t, tc.tool, tc.args)
			if !strings.Contains(text(res), tc.want) {
				t.Fatalf("got %q, want %q", text(res), tc.want)
			}
		})
	}
	if res := e.call(t, "read_text_file", map[string]any{"path": e.in("big.txt"), "head": 2.0}); res.IsError || text(res) != "x\nx" {
		t.Fatalf("head within the cap: %q", text(res))
	}
	if exists(e.in("w")) {
		t.Fatal("oversized write landed")
	}
}

// TestSearchPatternCPUBound: the agent controls both the glob and the depth
// of the tree; a pattern built to make matching quadratic must be refused
// or finish quickly, never pin a CPU.
func TestSearchPatternCPUBound(t *testing.T) {
	e := newEnv(t)
	deep := e.sandbox
	for i := 0; i < 100; i++ {
		deep = filepath.Join(deep, "d")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		mustWrite(t, filepath.Join(deep, fmt.Sprintf("f%d", i)), "")
	}
	alts := make([]string, 0, 5)
	for i := 0; i < 5; i++ {
		alts = append(alts, strings.Repeat("**/", 30)+"x"+string(rune('a'+i)))
	}
	evil := "{" + strings.Join(alts, ",") + "}"
	start := time.Now()
	res := e.call(t, "search_files", map[string]any{"path": e.sandbox, "pattern": evil,
		"excludePatterns": []any{evil, evil, evil}})
	// The work budget, not the clock, bounds the search; the time check
	// only catches a hang (the race detector slows matching tenfold).
	if d := time.Since(start); d > 60*time.Second {
		t.Fatalf("search took %v", d)
	}
	if !res.IsError || !strings.Contains(text(res), "too expensive") {
		t.Fatalf("the work budget did not stop the search: %q", text(res))
	}
	t.Logf("%v: %.80q", time.Since(start), text(res))
}

// TestCodeFilesAreNotWritten: files that make git or a shell run code are
// never written, created, edited or moved, in any spelling; reading them
// and dry-run edits stay possible.
func TestCodeFilesAreNotWritten(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, e.in("x"), "x")
	names := []string{".git/config", ".git/hooks/pre-commit", ".GIT/config", ".git./config", "GIT~1/config",
		"sub/.git/hooks/post-checkout", ".gitmodules", ".GitAttributes", "GITATT~1", "GITMOD~2", ".env", ".ENV ",
		".envrc", "a/.envrc", ".env::$DATA", ".git"}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			p := e.in(n)
			for _, tc := range []struct {
				tool string
				args map[string]any
			}{
				{tool: "write_file", args: map[string]any{"path": p, "content": "[core]\n\tfsmonitor = /tmp/pwn\n"}},
				{tool: "edit_file", args: map[string]any{"path": p, "edits": []any{map[string]any{"oldText": "a", "newText": "b"}}}},
				{tool: "create_directory", args: map[string]any{"path": p}},
				{tool: "move_file", args: map[string]any{"source": e.in("x"), "destination": p}},
				{tool: "move_file", args: map[string]any{"source": p, "destination": e.in("y")}},
			} {
				res := e.call(t, tc.tool, tc.args)
				if !res.IsError || !strings.Contains(text(res), "forbidden") {
					t.Fatalf("%s %q: %q", tc.tool, n, text(res))
				}
			}
			if exists(p) {
				t.Fatalf("%q was created", n)
			}
		})
	}
	mustWrite(t, e.in(".env"), "A=1\n")
	if res := e.call(t, "read_text_file", map[string]any{"path": e.in(".env")}); res.IsError {
		t.Fatalf("reading .env refused: %s", text(res))
	}
	if res := e.call(t, "edit_file", map[string]any{"path": e.in(".env"), "dryRun": true,
		"edits": []any{map[string]any{"oldText": "A=1", "newText": "A=2"}}}); res.IsError {
		t.Fatalf("dry-run edit of .env refused: %s", text(res))
	}
	for _, ok := range []string{".gitignore", ".github/workflows/x.yml", "env", ".environment", "a.git"} {
		if res := e.call(t, "write_file", map[string]any{"path": e.in(ok), "content": "x"}); res.IsError && !strings.Contains(text(res), "parent directory") {
			t.Fatalf("%s refused: %s", ok, text(res))
		}
	}
}
