package policy

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// setIndexed turns the per-tool rule index on or off (off: every rule is
// visited, the walk before indexRules).
func setIndexed(e *Engine, on bool) {
	for _, t := range e.tools {
		t.indexed = on
	}
}

// TestIndexedRulesMatchAll: every case of the decision suites evaluates
// alike with the per-tool rule index and with the walk over every rule.
func TestIndexedRulesMatchAll(t *testing.T) {
	suites := loadSuites(t)
	n := 0
	for _, name := range sortedKeys(suites) {
		s := suites[name]
		t.Run(name, func(t *testing.T) {
			tr := newTree(t)
			tr.apply(t, s.Setup)
			e := tr.engine(t, s)
			for _, c := range s.Cases {
				tr.apply(t, c.Setup)
				server, toolName, _ := strings.Cut(c.Tool, "__")
				args, _ := tr.expandValue(c.Args).(map[string]any)
				r := Request{Server: server, Tool: toolName, Args: args}
				setIndexed(e, true)
				got := e.Evaluate(context.Background(), r)
				setIndexed(e, false)
				want := e.Evaluate(context.Background(), r)
				setIndexed(e, true)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: indexed %+v, every rule %+v", c.Name, got.Decision, want.Decision)
				}
				n++
			}
		})
	}
	if n < 150 {
		t.Fatalf("compared %d cases", n)
	}
}

// TestIndexRulesPerTool: a tool's index lists exactly the rules whose server
// and tool conditions admit it, in order.
func TestIndexRulesPerTool(t *testing.T) {
	tr := newTree(t)
	e := tr.engine(t, suite{})
	for key, tl := range e.tools {
		if !tl.indexed {
			t.Fatalf("%s: not indexed", key)
		}
		var want []int32
		for i := range e.rules {
			c := call{e: e, t: tl, req: Request{Server: tl.server, Tool: tl.name}, rr: &resolvedRoles{all: ^roleSet(0)}}
			if c.matchesNonPath(&e.rules[i]) {
				want = append(want, int32(i))
			}
		}
		if !reflect.DeepEqual(tl.rules, want) && (len(tl.rules) != 0 || len(want) != 0) {
			t.Errorf("%s: index %v, want %v", key, tl.rules, want)
		}
	}
}

// TestReleaseClearsValues: a call's pooled block of canonical values is
// cleared before it goes back to the pool (no string of one call is left
// for the next), and the call no longer points at it.
func TestReleaseClearsValues(t *testing.T) {
	tr := newTree(t)
	e := tr.engine(t, suite{})
	tl := e.byName[toolName{"fetch", "http_fetch"}]
	c := call{e: e, ctx: context.Background(), t: tl, rr: tl.static,
		req: Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": "https://pkg.go.dev/net/url"}}}
	if !c.readArgs() {
		t.Fatal("readArgs refused the fixture's arguments")
	}
	if _, done := c.prepare(); done || c.block == nil {
		t.Fatalf("prepare: done %v, block %p", done, c.block)
	}
	b := c.block
	if len(c.vals[0].canon) != 1 || len(c.vals[0].domains) != 1 {
		t.Fatalf("values %+v", c.vals[0])
	}
	c.release()
	if c.block != nil || c.vals != nil {
		t.Fatal("the call still holds the released block")
	}
	if !reflect.DeepEqual(*b, valsBlock{}) {
		t.Fatalf("released block not cleared: %+v", *b)
	}
}
