package cli

import (
	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/policy"
)

// seedCatalog adds to the first annotation file (files[0]), for the listed
// servers configured with catalog:, the catalog's annotations of the tools
// no annotation file annotates, so that `tools pin` can pin them (an
// unpinned catalog version, or a new server version whose definitions
// differ from the catalog's pins). It returns the seeded tools: pruneSeeded
// drops those that were not pinned before the file is written, so that the
// file only takes over what the operator pinned.
func seedCatalog(files []*annotationFile, cfg *config.Config, names []string) map[string]map[string]bool {
	seeded := map[string]map[string]bool{}
	if len(files) == 0 {
		return seeded
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, a := range cfg.CatalogAnnotations() {
		if !want[a.Server] || annotated(files, a.Server, a.Tool) {
			continue
		}
		files[0].ann.Add(a)
		if seeded[a.Server] == nil {
			seeded[a.Server] = map[string]bool{}
		}
		seeded[a.Server][a.Tool] = true
	}
	return seeded
}

// annotated reports whether any of the files annotates server's tool.
func annotated(files []*annotationFile, server, tool string) bool {
	for _, f := range files {
		if sa := f.ann.Servers[server]; sa != nil && hasTool(sa, tool) {
			return true
		}
	}
	return false
}

func hasTool(sa *policy.ServerAnnotations, tool string) bool {
	for _, t := range sa.Tools {
		if t.Tool == tool {
			return true
		}
	}
	return false
}

// pruneSeeded removes the seeded annotations that no change pinned (and a
// server entry left empty by that).
func pruneSeeded(ann *policy.Annotations, seeded map[string]map[string]bool, changes []*pinChange) {
	pinned := map[string]bool{}
	for _, c := range changes {
		pinned[c.server+"__"+c.def.Name] = true
	}
	for srv, tools := range seeded {
		sa := ann.Servers[srv]
		if sa == nil {
			continue
		}
		keep := sa.Tools[:0]
		for _, t := range sa.Tools {
			if tools[t.Tool] && !pinned[srv+"__"+t.Tool] {
				continue
			}
			keep = append(keep, t)
		}
		sa.Tools = keep
		if len(sa.Tools) == 0 {
			delete(ann.Servers, srv)
		}
	}
}
