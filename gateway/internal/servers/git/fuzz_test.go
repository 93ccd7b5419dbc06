package git

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// FuzzCheckRevision: an accepted revision never starts with '-' and holds
// only printable ASCII without spaces.
func FuzzCheckRevision(f *testing.F) {
	for _, s := range []string{"HEAD", "main..feature", "-f", "--output=x", "v1^{commit}", "HEAD:README", "a b", "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if checkRevision("r", v) != nil {
			return
		}
		if strings.HasPrefix(v, "-") {
			t.Fatalf("accepted %q", v)
		}
		for i := 0; i < len(v); i++ {
			if v[i] <= 0x20 || v[i] >= 0x7f {
				t.Fatalf("accepted byte %#x in %q", v[i], v)
			}
		}
	})
}

// FuzzCheckRefName: every name the server accepts for a new branch or tag
// is also a valid branch name to git itself (differential check against
// git check-ref-format).
func FuzzCheckRefName(f *testing.F) {
	for _, s := range []string{"feature/x", "a..b", "-x", "x.lock", "a/.b", "@", "a@{b", "ok-1.2", "a//b", "refs/heads/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if checkRefName("n", v) != nil {
			return
		}
		if err := exec.Command("git", "check-ref-format", "--branch", v).Run(); err != nil {
			t.Fatalf("accepted %q, which git refuses as a branch name", v)
		}
	})
}

// FuzzSandboxPath: an accepted path is clean, absolute, free of control
// characters and inside the sandbox by a separator boundary.
func FuzzSandboxPath(f *testing.F) {
	s := &Server{sandbox: "/sandbox"}
	for _, p := range []string{"/sandbox", "/sandbox/a", "/sandbox2/a", "/sandbox/../etc", "/sandbox/a\x00/../../x", "sandbox/a", "/sandbox/./a", "/sandbox/a/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := s.sandboxPath("path", p)
		if err != nil {
			return
		}
		if got != p || filepath.Clean(p) != p || !(p == "/sandbox" || strings.HasPrefix(p, "/sandbox/")) {
			t.Fatalf("accepted %q", p)
		}
		if checkRawPath("p", p) != nil {
			t.Fatalf("accepted control characters in %q", p)
		}
	})
}

// FuzzCallArguments: argument checking never panics and never lets an
// undeclared key through, whatever JSON the agent sends.
func FuzzCallArguments(f *testing.F) {
	f.Add([]byte(`{"path":"/sandbox/r","message":"m","amend":true}`))
	f.Add([]byte(`{"path":1,"files":[1,"a"],"max_count":-1}`))
	f.Add([]byte(`{"operation":"delete","name":"-x","force":"yes"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw map[string]any
		if json.Unmarshal(data, &raw) != nil {
			return
		}
		for _, d := range toolDefs {
			if _, err := toolargs.Parse(d.Args, raw); err != nil {
				continue
			}
			for k := range raw {
				if !slices.ContainsFunc(d.Args, func(a toolargs.Arg) bool { return a.Name == k }) {
					t.Fatalf("%s accepted undeclared %q", d.Name, k)
				}
			}
		}
	})
}

func BenchmarkCheckRevision(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = checkRevision("revision", "refs/heads/feature/some-branch~2")
	}
}

// BenchmarkOpenRepo is the per-call cost of locating and checking a
// repository when its config scan is cached (no git process).
func BenchmarkOpenRepo(b *testing.B) {
	g := newGenv(b, nil)
	repo := g.repo("r")
	ctx := context.Background()
	if _, err := g.srv.openRepo(ctx, "path", repo); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.srv.openRepo(ctx, "path", repo); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatus is a whole status call (one git process when the scan is
// cached).
func BenchmarkStatus(b *testing.B) {
	g := newGenv(b, nil)
	repo := g.repo("r")
	args := map[string]any{"path": repo, "short": true}
	b.ReportAllocs()
	for b.Loop() {
		if r := g.call("status", args); r.IsError {
			b.Fatal(text(r))
		}
	}
}
