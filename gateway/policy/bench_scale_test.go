package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// scaleRulesEngine loads the base fixture with n extra path rules placed
// before every other rule: rule i allows reads within ~/Projects/p<i>, so
// a read in ~/Documents passes the server, role and tool checks of all n
// and is refused by each one's path check, then is allowed by
// allow-read-documents (the rule after them). This is the worst case of a
// first-match list: the deciding rule is the last of the n + 1.
func scaleRulesEngine(b *testing.B, n int) (*Engine, tree, *countFS) {
	b.Helper()
	tr := newTree(b)
	tr.apply(b, []op{{Write: "$HOME/Documents/notes.txt"}})
	for i := range n {
		if i < 16 { // a few exist; the path check does not depend on it
			tr.apply(b, []op{{Mkdir: fmt.Sprintf("$HOME/Projects/p%d", i)}})
		}
	}
	src := filepath.Join("testdata", "fixtures", "base")
	raw, err := os.ReadFile(filepath.Join(src, CompiledPolicyFile))
	if err != nil {
		b.Fatal(err)
	}
	var p CompiledPolicy
	if err := json.Unmarshal(raw, &p); err != nil {
		b.Fatal(err)
	}
	rules := make([]CompiledRule, 0, n+1+len(p.Rules))
	for i := range n {
		rules = append(rules, pathRule(fmt.Sprintf("allow-read-project-%d", i), fmt.Sprintf("~/Projects/p%d", i)))
	}
	rules = append(rules, pathRule("allow-read-documents", "~/Documents"))
	p.Rules = append(rules, p.Rules...)
	dir := b.TempDir()
	out, err := json.Marshal(&p)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CompiledPolicyFile), out, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{AnnotationsFile, DynamicListsFile} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	e, err := LoadDir(dir, Settings{Home: tr.home, Sandbox: tr.sandbox}, withGit(b))
	if err != nil {
		b.Fatal(err)
	}
	cfs := &countFS{inner: osFS{}}
	e.canon.fs = cfs
	return e, tr, cfs
}

// pathRule allows filesystem reads within dir.
func pathRule(name, dir string) CompiledRule {
	var r CompiledRule
	js := fmt.Sprintf(`{"name": %q, "description": "scale", "principle": "scale", "if": {"roles": ["read-path"], "server": ["filesystem"],
		"paths": {"roles": ["read-path"], "within": %q}}, "then": "allow", "reason": "Reading it is allowed."}`, name, dir)
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		panic(err)
	}
	return r
}

// BenchmarkEvaluateRulesScale: a read in ~/Documents decided by the last of
// 10 to 100,000 rules (scaleRulesEngine), the original engine's "1,000
// rules, a read in Documents" grown both ways. Reports the engine's heap
// (after a GC, with the engine alive) at each size.
func BenchmarkEvaluateRulesScale(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000, 100000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			e, tr, cfs := scaleRulesEngine(b, n)
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			r := Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": tr.home + "/Documents/notes.txt"}}
			if d := e.Evaluate(b.Context(), r).Decision; d.Rule != "allow-read-documents" {
				b.Fatalf("decided by %s (%s: %s), want allow-read-documents", d.Rule, d.Status, d.Reason)
			}
			runBench(b, e, cfs, r, Allow)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1e6, "engine-MB")
			runtime.KeepAlive(e)
		})
	}
}
