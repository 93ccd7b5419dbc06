package annotate

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/gatewayconfig"
	s "ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/gateway/policy"
)

// Lister lists the tools of a server (ListTools in production).
type Lister func(ctx context.Context, srv gatewayconfig.Server) ([]ToolSchema, error)

// Options tune a run.
type Options struct {
	BatchSize int
	// Now is the clock for generatedAt.
	Now func() time.Time
}

// Note says what happened to one server.
type Note struct {
	Server string
	Tools  int
	Status string // "annotated" or "unchanged"
}

// Run annotates the external servers in servers and merges the result into
// existing (other servers' entries are kept as they are). A server whose
// tool list and prompt are unchanged (same inputHash) keeps its annotations
// without a model call. Servers are handled concurrently.
func Run(ctx context.Context, r *s.Runner, servers []gatewayconfig.Server, existing *policy.Annotations, list Lister, opt Options) (*policy.Annotations, []Note, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	out := &policy.Annotations{Servers: map[string]*policy.ServerAnnotations{}}
	if existing != nil {
		for k, v := range existing.Servers {
			out.Servers[k] = v
		}
	}
	var mu sync.Mutex
	var notes []Note
	g, gctx := errgroup.WithContext(ctx)
	for _, srv := range servers {
		if !srv.External() {
			continue
		}
		g.Go(func() error {
			tools, err := list(gctx, srv)
			if err != nil {
				return err
			}
			hash := InputHash(srv.Name, tools, opt.BatchSize)
			mu.Lock()
			prev := out.Servers[srv.Name]
			mu.Unlock()
			if prev != nil && prev.InputHash == hash {
				mu.Lock()
				notes = append(notes, Note{Server: srv.Name, Tools: len(prev.Tools), Status: "unchanged"})
				mu.Unlock()
				return nil
			}
			anns, err := Annotate(gctx, r, srv.Name, tools, opt.BatchSize)
			if err != nil {
				return err
			}
			keepPins(prev, anns)
			mu.Lock()
			out.Servers[srv.Name] = &policy.ServerAnnotations{InputHash: hash, Tools: anns}
			notes = append(notes, Note{Server: srv.Name, Tools: len(anns), Status: "annotated"})
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if len(notes) == 0 {
		return nil, nil, fmt.Errorf("annotating tools: no external server (with a command) is configured")
	}
	sort.Slice(notes, func(i, j int) bool { return notes[i].Server < notes[j].Server })
	out.GeneratedAt = artifact.Timestamp(opt.Now())
	if existing != nil && allUnchanged(notes) {
		out.GeneratedAt = existing.GeneratedAt // nothing changed: keep the file as it is
	}
	return out, notes, nil
}

func allUnchanged(notes []Note) bool {
	for _, n := range notes {
		if n.Status != "unchanged" {
			return false
		}
	}
	return true
}

// keepPins carries the pins of prev's tools over to their new annotations.
// The compiler never creates a pin (`ironcurtain tools pin` does, after an
// operator reviewed the definition); the gateway compares every pin with
// the tool as it lists it, so a kept pin of a tool that did not change stays
// valid, and one of a tool that changed hides that tool until it is pinned
// again.
func keepPins(prev *policy.ServerAnnotations, anns []policy.ToolAnnotation) {
	if prev == nil {
		return
	}
	pins := map[string]*policy.ToolPin{}
	for _, t := range prev.Tools {
		if t.Pin != nil {
			pins[t.Tool] = t.Pin
		}
	}
	for i := range anns {
		if p := pins[anns[i].Tool]; p != nil {
			cp := *p
			anns[i].Pin = &cp
		}
	}
}
