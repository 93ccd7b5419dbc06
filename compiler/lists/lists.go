// Package lists resolves the dynamic lists a compiled policy references
// ("@major-news-sites") into concrete values with the model, and keeps the
// operator's manualAdditions and manualRemovals across every refresh. A list
// whose definition and prompt are unchanged is not asked again.
package lists

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"ironcurtain.dev/compiler/artifact"
	s "ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/gateway/policy"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxValues bounds the size of one resolved list.
const MaxValues = 500

// Options tune a resolution.
type Options struct {
	// Refresh asks the model again even when a list's inputs are unchanged.
	Refresh bool
	// Only restricts resolution to these list names (others are kept as
	// they are); empty means every list.
	Only []string
	// Now is the clock for resolvedAt and generatedAt.
	Now func() time.Time
}

// Note says what happened to one list.
type Note struct {
	List   string
	Status string // "resolved", "unchanged", "manual-only"
	Values int    // effective values
	Detail string
}

// Resolve returns dynamic-lists.json for defs. existing (may be nil) supplies
// the manual additions and removals, which always survive, and the values of
// lists whose inputs are unchanged. Lists that need data from a tool server
// (requiresMcp) are not guessed by the model: they keep their earlier values
// and manual additions, and a Note says so. Independent lists resolve
// concurrently.
func Resolve(ctx context.Context, r *s.Runner, defs []policy.ListDefinition, existing *policy.DynamicLists, opt Options) (*policy.DynamicLists, []Note, error) {
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	only := map[string]bool{}
	for _, n := range opt.Only {
		only[n] = true
	}
	out := &policy.DynamicLists{GeneratedAt: artifact.Timestamp(now()), Lists: map[string]policy.ResolvedList{}}
	notes := make([]Note, len(defs))
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	for i, d := range defs {
		prev, had := policy.ResolvedList{}, false
		if existing != nil {
			prev, had = existing.Lists[d.Name]
		}
		g.Go(func() error {
			l, note, err := resolveOne(ctx, r, d, prev, had, opt.Refresh || (len(only) > 0 && only[d.Name]), len(only) > 0 && !only[d.Name], now)
			if err != nil {
				return err
			}
			mu.Lock()
			out.Lists[d.Name] = l
			notes[i] = note
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	sort.Slice(notes, func(i, j int) bool { return notes[i].List < notes[j].List })
	return out, notes, nil
}

// Prompt is the text sent to the model for d (also hashed into inputHash).
func Prompt(d policy.ListDefinition) string {
	return strings.TrimSpace(d.GenerationPrompt) + "\n\n" + formatGuidance[d.Type]
}

var formatGuidance = map[string]string{
	policy.MatchDomains:     "Return registrable domain names (example.com) or wildcard patterns (*.example.com), lower case, without scheme, path or port. Never return a bare top-level or public suffix (com, co.uk), an IP address or \"*\".",
	policy.MatchEmails:      "Return email addresses in user@domain form.",
	policy.MatchIdentifiers: "Return identifiers as plain strings without spaces, one per entry.",
}

// InputHash is the content hash of a definition and its prompt.
func InputHash(d policy.ListDefinition) string {
	return artifact.InputHash("list", d.Name, d.Type, d.GenerationPrompt, fmt.Sprint(d.RequiresMcp), Prompt(d))
}

type reply struct {
	Values []string `json:"values"`
}

func resolveOne(ctx context.Context, r *s.Runner, d policy.ListDefinition, prev policy.ResolvedList, had, refresh, keep bool, now func() time.Time) (policy.ResolvedList, Note, error) {
	hash := InputHash(d)
	manual := policy.ResolvedList{ManualAdditions: orEmpty(prev.ManualAdditions), ManualRemovals: orEmpty(prev.ManualRemovals)}
	note := Note{List: d.Name}
	switch {
	case had && keep:
		note.Status = "unchanged"
		prev.Values, prev.ManualAdditions, prev.ManualRemovals = orEmpty(prev.Values), manual.ManualAdditions, manual.ManualRemovals
		note.Values = len(prev.Effective())
		return prev, note, nil
	case had && prev.InputHash == hash && !refresh:
		note.Status = "unchanged"
		prev.Values, prev.ManualAdditions, prev.ManualRemovals = orEmpty(prev.Values), manual.ManualAdditions, manual.ManualRemovals
		note.Values = len(prev.Effective())
		return prev, note, nil
	case d.RequiresMcp:
		l := manual
		l.Values = orEmpty(prev.Values)
		l.InputHash = hash
		l.ResolvedAt = prev.ResolvedAt
		if l.ResolvedAt == "" {
			l.ResolvedAt = artifact.Timestamp(now())
		}
		note.Status = "manual-only"
		note.Values = len(l.Effective())
		note.Detail = fmt.Sprintf("needs data from %q; add its values to manualAdditions in dynamic-lists.json", d.McpServerHint)
		return l, note, nil
	}
	if _, ok := formatGuidance[d.Type]; !ok {
		return policy.ResolvedList{}, note, fmt.Errorf("resolving list %s: unknown type %q", d.Name, d.Type)
	}
	schema := s.Object(map[string]*jsonschema.Schema{
		"values": s.MaxItems(s.Array(s.String("one list entry")), MaxValues),
	}, "values")
	res, err := s.Generate(ctx, r, s.Request{
		Step:   "list/" + d.Name,
		System: "You produce concrete lists of values for a security policy. Be accurate and conservative: every value you return will be trusted by the policy.",
		User:   Prompt(d),
		Schema: schema,
	}, func(v *reply) error { return checkValues(d.Type, v.Values) })
	if err != nil {
		return policy.ResolvedList{}, note, fmt.Errorf("resolving list %s: %w", d.Name, err)
	}
	l := manual
	l.Values = normalise(d.Type, res.Value.Values)
	l.ResolvedAt = artifact.Timestamp(now())
	l.InputHash = hash
	note.Status = "resolved"
	note.Values = len(l.Effective())
	return l, note, nil
}

// normalise lower-cases domains and emails, removes duplicates and adds the
// "*.x" wildcard next to every bare domain x, so www.x matches too.
func normalise(typ string, values []string) []string {
	seen := map[string]bool{}
	out := []string{}
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if typ != policy.MatchIdentifiers {
			v = strings.ToLower(v)
		}
		add(v)
	}
	if typ == policy.MatchDomains {
		for _, v := range append([]string(nil), out...) {
			if !strings.HasPrefix(v, "*.") {
				add("*." + v)
			}
		}
	}
	return out
}

func orEmpty(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
