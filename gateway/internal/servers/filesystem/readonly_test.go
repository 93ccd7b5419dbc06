package filesystem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const guide = "READ-ONLY-GUIDE"

// roEnv is env plus a read-only directory "docs" next to the sandbox, with
// a file, a subdirectory, a symlink to the secret outside and a directory
// symlink that leaves it.
type roEnv struct {
	*env
	ro string
}

func newROEnv(t *testing.T) *roEnv {
	t.Helper()
	e := newEnv(t)
	base := filepath.Dir(e.sandbox)
	r := &roEnv{env: e, ro: filepath.Join(base, "docs")}
	if err := os.MkdirAll(filepath.Join(r.ro, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(r.ro, "guide.md"), guide)
	mustWrite(t, filepath.Join(r.ro, "sub", "deep.md"), guide)
	if err := os.Symlink(filepath.Join(e.outside, "secret"), filepath.Join(r.ro, "escape.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(r.ro, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, "docs2"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(base, "docs2", "x.md"), secret)
	srv, err := New(Config{Root: e.sandbox, ReadOnlyDirs: []string{r.ro}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	e.srv = srv
	return r
}

func (r *roEnv) at(rel string) string { return filepath.Join(r.ro, filepath.FromSlash(rel)) }

// assertROIntact fails if anything in the read-only directory changed.
func (r *roEnv) assertROIntact(t *testing.T) {
	t.Helper()
	if got := mustRead(t, r.at("guide.md")); got != guide {
		t.Fatalf("guide.md was modified: %q", got)
	}
	ents, err := os.ReadDir(r.ro)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	if strings.Join(names, ",") != "escape.md,guide.md,out,sub" {
		t.Fatalf("the read-only directory changed: %v", names)
	}
	r.assertOutsideIntact(t)
}

// TestReadOnlyDirReads: the read tools read a read-only directory like the
// sandbox, and nothing there leads out of it.
func TestReadOnlyDirReads(t *testing.T) {
	r := newROEnv(t)
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		want    string // substring of the result
		wantErr bool
	}{
		{name: "read a file", tool: "read_text_file", args: map[string]any{"path": r.at("guide.md")}, want: guide},
		{name: "head of a file", tool: "read_text_file", args: map[string]any{"path": r.at("sub/deep.md"), "head": 1}, want: guide},
		{name: "list", tool: "list_directory", args: map[string]any{"path": r.ro}, want: "[FILE] guide.md"},
		{name: "list with sizes", tool: "list_directory_with_sizes", args: map[string]any{"path": r.at("sub")}, want: "deep.md"},
		{name: "tree", tool: "directory_tree", args: map[string]any{"path": r.ro}, want: `"deep.md"`},
		{name: "search", tool: "search_files", args: map[string]any{"path": r.ro, "pattern": "**/*.md"}, want: r.at("sub/deep.md")},
		{name: "info", tool: "get_file_info", args: map[string]any{"path": r.at("guide.md")}, want: "isFile: true"},
		{name: "several, one outside", tool: "read_multiple_files", args: map[string]any{"paths": []any{r.in("movable"), r.at("guide.md"), filepath.Join(r.outside, "secret")}},
			want: r.at("guide.md") + ":\n" + guide},
		{name: "allowed directories", tool: "list_allowed_directories", args: map[string]any{}, want: r.ro + " (read-only)"},
		{name: "a symlink to a file outside", tool: "read_text_file", args: map[string]any{"path": r.at("escape.md")}, wantErr: true},
		{name: "a directory symlink that leaves", tool: "read_text_file", args: map[string]any{"path": r.at("out/secret")}, wantErr: true},
		{name: "listing through a directory symlink", tool: "list_directory", args: map[string]any{"path": r.at("out")}, wantErr: true},
		{name: "dot-dot out of it", tool: "read_text_file", args: map[string]any{"path": r.ro + "/../outside/secret"}, wantErr: true},
		{name: "a sibling with its name as prefix", tool: "read_text_file", args: map[string]any{"path": r.ro + "2/x.md"}, wantErr: true},
		{name: "outside everything", tool: "read_text_file", args: map[string]any{"path": filepath.Join(r.outside, "secret")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := r.call(t, tt.tool, tt.args)
			got := text(res)
			if res.IsError != tt.wantErr {
				t.Fatalf("IsError = %v (%q), want %v", res.IsError, got, tt.wantErr)
			}
			if strings.Contains(got, secret) {
				t.Fatalf("the secret leaked: %q", got)
			}
			if !tt.wantErr && !strings.Contains(got, tt.want) {
				t.Fatalf("result %q does not contain %q", got, tt.want)
			}
			if tt.wantErr && strings.Contains(got, r.outside) {
				t.Fatalf("the error names a host path outside: %q", got)
			}
		})
	}
	r.assertROIntact(t)
}

// TestReadOnlyDirWrites: no write tool changes a read-only directory, even
// when the policy allowed the call (the server is the last line).
func TestReadOnlyDirWrites(t *testing.T) {
	tests := []struct {
		name string
		tool string
		args func(r *roEnv) map[string]any
	}{
		{name: "create a file", tool: "write_file", args: func(r *roEnv) map[string]any {
			return map[string]any{"path": r.at("new.md"), "content": "x"}
		}},
		{name: "overwrite a file", tool: "write_file", args: func(r *roEnv) map[string]any {
			return map[string]any{"path": r.at("guide.md"), "content": "x"}
		}},
		{name: "write through the escaping symlink", tool: "write_file", args: func(r *roEnv) map[string]any {
			return map[string]any{"path": r.at("escape.md"), "content": "x"}
		}},
		{name: "edit a file", tool: "edit_file", args: func(r *roEnv) map[string]any {
			return map[string]any{"path": r.at("guide.md"), "edits": []any{map[string]any{"oldText": "READ", "newText": "WRITE"}}}
		}},
		{name: "create a directory", tool: "create_directory", args: func(r *roEnv) map[string]any {
			return map[string]any{"path": r.at("d")}
		}},
		{name: "move out of it (deletes the original)", tool: "move_file", args: func(r *roEnv) map[string]any {
			return map[string]any{"source": r.at("guide.md"), "destination": r.in("guide.md")}
		}},
		{name: "move into it", tool: "move_file", args: func(r *roEnv) map[string]any {
			return map[string]any{"source": r.in("movable"), "destination": r.at("movable")}
		}},
		{name: "move within it", tool: "move_file", args: func(r *roEnv) map[string]any {
			return map[string]any{"source": r.at("guide.md"), "destination": r.at("sub/guide.md")}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newROEnv(t)
			res := r.call(t, tt.tool, tt.args(r))
			if !res.IsError {
				t.Fatalf("%s succeeded in a read-only directory: %q", tt.tool, text(res))
			}
			if got := text(res); !strings.Contains(got, "read-only") {
				t.Fatalf("error %q does not say the directory is read-only", got)
			}
			r.assertROIntact(t)
			if !exists(r.in("movable")) || exists(r.in("guide.md")) {
				t.Fatal("the sandbox changed")
			}
		})
	}
}

func TestReadOnlyDirConfig(t *testing.T) {
	e := newEnv(t)
	base := filepath.Dir(e.sandbox)
	tests := []struct {
		name string
		dirs []string
		want string
	}{
		{name: "relative", dirs: []string{"docs"}, want: "is not absolute"},
		{name: "missing", dirs: []string{filepath.Join(base, "nope")}, want: "resolving read-only directory"},
		{name: "a file", dirs: []string{filepath.Join(e.outside, "secret")}, want: "is not a directory"},
		{name: "inside the sandbox", dirs: []string{e.sandbox}, want: "overlaps the sandbox"},
		{name: "containing the sandbox", dirs: []string{base}, want: "overlaps the sandbox"},
		{name: "the root", dirs: []string{"/"}, want: "overlaps the sandbox"},
		{name: "overlapping each other", dirs: []string{e.outside, e.outside}, want: "overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(Config{Root: e.sandbox, ReadOnlyDirs: tt.dirs})
			if err == nil {
				srv.Close()
				t.Fatalf("New accepted %q", tt.dirs)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
