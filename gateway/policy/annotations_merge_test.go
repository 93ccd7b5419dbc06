package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadDirMergesAnnotationsFile: with a tool-annotations.json in the
// policy directory and an annotations_file, both load (the old loader
// silently ignored annotations_file, so an external server's tools stayed
// unknown and every call to them was denied without a word).
func TestLoadDirMergesAnnotationsFile(t *testing.T) {
	const external = `{"servers": {"notes": {"tools": [{"toolName": "search", "args": {"q": ["none"]}}]}}}`
	tests := []struct {
		name      string
		dirAnn    string
		fileAnn   string // "" : annotations_file not set
		fileIsDir bool   // annotations_file names the policy directory's own file
		wantTools []string
		wantErr   []string
	}{
		{name: "both files", dirAnn: okAnn, fileAnn: external, wantTools: []string{"s__t", "notes__search"}},
		{name: "only the directory's", dirAnn: okAnn, wantTools: []string{"s__t"}},
		{name: "only annotations_file", fileAnn: external, wantTools: []string{"notes__search"}},
		{name: "same server, other tools", dirAnn: okAnn, fileAnn: `{"servers": {"s": {"tools": [{"toolName": "u", "args": {}}]}}}`, wantTools: []string{"s__t", "s__u"}},
		{name: "annotations_file is the directory's file", dirAnn: okAnn, fileIsDir: true, wantTools: []string{"s__t"}},
		{
			name: "a tool in both", dirAnn: okAnn, fileAnn: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": ["read-path"]}}]}}}`,
			wantErr: []string{"external.json: servers.s.tools[0]: tool s__t is also annotated in", filepath.Join("DIR", AnnotationsFile) + " (servers.s.tools[0])"},
		},
		{name: "annotations_file missing", dirAnn: okAnn, fileAnn: "-", wantErr: []string{"annotations_file", "external.json"}},
		{name: "annotations_file invalid", dirAnn: okAnn, fileAnn: `{"servers": {"n": {"tools": [{"toolName": "x", "args": {"a": ["bogus"]}}]}}}`, wantErr: []string{`external.json: servers.n.tools[0].args.a: unknown role "bogus"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, okPolicy, tt.dirAnn, "")
			var s Settings
			switch {
			case tt.fileIsDir:
				s.AnnotationsFile = filepath.Join(dir, ".", AnnotationsFile)
			case tt.fileAnn != "":
				s.AnnotationsFile = filepath.Join(t.TempDir(), "external.json")
				if tt.fileAnn != "-" {
					if err := os.WriteFile(s.AnnotationsFile, []byte(tt.fileAnn), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			e, err := LoadDir(dir, s)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("loaded (%d tools), want an error containing %q", len(e.Tools()), tt.wantErr)
				}
				msg := strings.ReplaceAll(err.Error(), dir, "DIR")
				for _, w := range tt.wantErr {
					if !strings.Contains(msg, w) {
						t.Fatalf("error %q does not contain %q", msg, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(e.Tools()); got != len(tt.wantTools) {
				t.Fatalf("%d tools, want %v", got, tt.wantTools)
			}
			for _, key := range tt.wantTools {
				server, tool, _ := strings.Cut(key, "__")
				d := e.Evaluate(context.Background(), Request{Server: server, Tool: tool, Args: map[string]any{}}).Decision
				if d.Rule == "structural-unknown-tool" {
					t.Fatalf("%s is unknown to the engine: %+v", key, d)
				}
			}
		})
	}
}

func TestMergeAnnotations(t *testing.T) {
	a := &Annotations{GeneratedAt: "g1", Servers: map[string]*ServerAnnotations{"x": {InputHash: "h", Tools: []ToolAnnotation{{Tool: "a"}}}}}
	b := &Annotations{Servers: map[string]*ServerAnnotations{"x": {InputHash: "other", Tools: []ToolAnnotation{{Tool: "b"}}}, "y": {InputHash: "hy", Tools: []ToolAnnotation{{Tool: "c"}}}}}
	if got, err := MergeAnnotations(AnnotationSource{File: "one", Annotations: a}, AnnotationSource{File: "none"}); err != nil || got != a {
		t.Fatalf("one source: %v, %v", got, err)
	}
	if got, err := MergeAnnotations(); err != nil || got != nil {
		t.Fatalf("no source: %v, %v", got, err)
	}
	m, err := MergeAnnotations(AnnotationSource{File: "A", Annotations: a}, AnnotationSource{File: "B", Annotations: b})
	if err != nil {
		t.Fatal(err)
	}
	if m.GeneratedAt != "g1" || len(m.Servers["x"].Tools) != 2 || m.Servers["x"].InputHash != "" || m.Servers["y"].InputHash != "hy" {
		t.Fatalf("merged %+v %+v %+v", m, m.Servers["x"], m.Servers["y"])
	}
	if len(a.Servers["x"].Tools) != 1 {
		t.Fatal("merge changed its input")
	}
	_, err = MergeAnnotations(AnnotationSource{File: "A", Annotations: a}, AnnotationSource{File: "B", Annotations: a})
	if err == nil || !strings.Contains(err.Error(), "B: servers.x.tools[0]: tool x__a is also annotated in A (servers.x.tools[0])") {
		t.Fatalf("conflict: %v", err)
	}
}

// TestLoadDirDeclaredToolInBothFiles: a tool declared in code (a built-in
// server's) overrides both files' entries, so its appearing in both is not a
// conflict; another tool in both still is.
func TestLoadDirDeclaredToolInBothFiles(t *testing.T) {
	dir := writeDir(t, okPolicy, okAnn, "")
	ext := filepath.Join(t.TempDir(), "external.json")
	if err := os.WriteFile(ext, []byte(okAnn), 0o644); err != nil {
		t.Fatal(err)
	}
	declared := []ToolAnnotation{{Server: "s", Tool: "t", Args: []ArgAnnotation{{Name: "a", Spec: Static(RoleNone)}}}}
	if _, err := LoadDir(dir, Settings{AnnotationsFile: ext, Annotations: declared}); err != nil {
		t.Fatalf("declared tool in both files: %v", err)
	}
	if _, err := LoadDir(dir, Settings{AnnotationsFile: ext}); err == nil || !strings.Contains(err.Error(), "tool s__t is also annotated in") {
		t.Fatalf("undeclared tool in both files: %v", err)
	}
}
