package policy

import (
	"testing"
)

// BenchmarkEvaluateReadUnicodeName: a read whose path has non-ASCII
// components, so that every rune is checked for invisibility and each such
// component is normalised and folded against the protected names.
func BenchmarkEvaluateReadUnicodeName(b *testing.B) {
	e, tr, cfs := benchEngine(b, suite{Setup: []op{{Write: "$SANDBOX/données/résumé.txt"}}})
	runBench(b, e, cfs, Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": tr.sandbox + "/données/résumé.txt"}}, Allow)
}

// BenchmarkEvaluateReadHardLink: a read of a file with two links, which
// lists the inodes under the protected paths (the fixture's policy
// directory and $OUTSIDE/protected with 20 files) on every call.
func BenchmarkEvaluateReadHardLink(b *testing.B) {
	setup := []op{{Write: "$SANDBOX/a.txt"}, {Link: []string{"$SANDBOX/a2.txt", "$SANDBOX/a.txt"}}}
	for i := 0; i < 20; i++ {
		setup = append(setup, op{Write: "$OUTSIDE/protected/f" + string(rune('a'+i))})
	}
	e, tr, cfs := benchEngine(b, suite{Setup: setup, Settings: settings{ProtectedPaths: []string{"$OUTSIDE/protected"}}})
	runBench(b, e, cfs, Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": tr.sandbox + "/a2.txt"}}, Allow)
}

// BenchmarkSpellingChecks: the character and protected-name checks alone,
// for an ASCII path and one with non-ASCII components.
func BenchmarkSpellingChecks(b *testing.B) {
	for _, tt := range []struct{ name, raw string }{
		{name: "ascii", raw: "/workspace/src/internal/servers/filesystem/filesystem.go"},
		{name: "unicode", raw: "/workspace/données/résumé/文書/naïve.txt"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if spellingProblem(tt.raw) != "" {
					b.Fatal("refused")
				}
				if c, _ := protectedSpelling(tt.raw); c != "" {
					b.Fatal("refused")
				}
			}
		})
	}
}
