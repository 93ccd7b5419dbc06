package policy

import (
	"fmt"
	"path/filepath"
)

// AnnotationSource is one tool-annotations.json and the file it came from
// (named in errors).
type AnnotationSource struct {
	File        string
	Annotations *Annotations
}

// MergeAnnotations combines annotation files into one set: the policy
// directory's tool-annotations.json and gateway.yaml's annotations_file are
// both loaded, so an external server's tools annotated in one are not lost
// because the other exists. A tool (server and tool name) annotated in more
// than one file is an error naming both files and JSON paths: which one
// would decide is not guessable, so neither does. A server may have tools in
// several files; its inputHash is kept only when the files agree. Nil
// sources are skipped; with one source it is returned as it is.
func MergeAnnotations(srcs ...AnnotationSource) (*Annotations, error) {
	return MergeAnnotationsExcept(nil, srcs...)
}

// MergeAnnotationsExcept is MergeAnnotations where a tool for which
// ignored(server, tool) is true may appear in several files: the engine
// does so for the tools declared in code (Settings.Annotations), whose
// file entries it ignores anyway.
func MergeAnnotationsExcept(ignored func(server, tool string) bool, srcs ...AnnotationSource) (*Annotations, error) {
	var live []AnnotationSource
	for _, s := range srcs {
		if s.Annotations != nil {
			live = append(live, s)
		}
	}
	switch len(live) {
	case 0:
		return nil, nil
	case 1:
		return live[0].Annotations, nil
	}
	type origin struct {
		file string
		path string
	}
	seen := map[string]origin{}
	out := &Annotations{Servers: map[string]*ServerAnnotations{}}
	hashFrom := map[string]string{}
	for _, src := range live {
		if out.GeneratedAt == "" {
			out.GeneratedAt = src.Annotations.GeneratedAt
		}
		for _, server := range sortedKeys(src.Annotations.Servers) {
			sa := src.Annotations.Servers[server]
			if sa == nil {
				continue
			}
			m := out.Servers[server]
			if m == nil {
				m = &ServerAnnotations{InputHash: sa.InputHash}
				out.Servers[server] = m
				hashFrom[server] = sa.InputHash
			} else if hashFrom[server] != sa.InputHash {
				m.InputHash = ""
			}
			for i, t := range sa.Tools {
				key := server + "__" + t.Tool
				path := fmt.Sprintf("servers.%s.tools[%d]", server, i)
				if o, dup := seen[key]; dup && t.Tool != "" && (ignored == nil || !ignored(server, t.Tool)) {
					return nil, &FileError{File: src.File, Path: path, Err: fmt.Errorf("tool %s is also annotated in %s (%s): a tool may be annotated in one file only (the policy directory's %s or annotations_file)", key, o.file, o.path, AnnotationsFile)}
				}
				seen[key] = origin{file: src.File, path: path}
				m.Tools = append(m.Tools, t)
			}
		}
	}
	return out, nil
}

// samePath reports whether a and b name the same file lexically (after
// making them absolute).
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}
