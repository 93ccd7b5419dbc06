package gitremote

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/policy"
)

// countingResolver returns a resolver that counts git runs and, when aged,
// sees every file as older than the racy window.
func countingResolver(aged bool) (*Resolver, *atomic.Int64) {
	g := New(Options{})
	var n atomic.Int64
	g.run = func(ctx context.Context, o gitexec.Options, args ...string) (gitexec.Result, error) {
		n.Add(1)
		return gitexec.Run(ctx, o, args...)
	}
	if aged {
		g.now = func() time.Time { return time.Now().Add(time.Hour) }
	}
	return g, &n
}

func TestGitResolverCache(t *testing.T) {
	tr := newTree(t)
	tr.apply(t, []op{
		{GitRepo: "$SANDBOX/app"},
		{Git: []string{"$SANDBOX/app", "remote", "add", "origin", "git@github.com:acme/app.git"}},
	})
	repo := filepath.Join(tr.sandbox, "app")
	ctx := context.Background()
	resolve := func(g *Resolver) policy.RemoteResolution {
		t.Helper()
		res, err := g.Resolve(ctx, repo, tr.sandbox, "origin", true)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// Both ways of reading the repository: natively (no git run) and
	// through git (the fallback).
	for _, mode := range []struct {
		name     string
		noNative bool
		perCold  int64 // git runs per cold resolution
	}{{name: "native", perCold: 0}, {name: "git", noNative: true, perCold: 2}} {
		t.Run(mode.name+": fresh files are never cached", func(t *testing.T) {
			g, n := countingResolver(false)
			g.noNative = mode.noNative
			resolve(g)
			resolve(g)
			if cold := g.native.Load() + g.fallback.Load(); cold != 2 || n.Load() != 2*mode.perCold {
				t.Fatalf("%d cold resolutions and %d git runs, want 2 and %d (no caching of racy entries)", cold, n.Load(), 2*mode.perCold)
			}
		})

		t.Run(mode.name+": old files are cached", func(t *testing.T) {
			g, n := countingResolver(true)
			g.noNative = mode.noNative
			resolve(g)
			resolve(g)
			if cold := g.native.Load() + g.fallback.Load(); cold != 1 || n.Load() != mode.perCold {
				t.Fatalf("%d cold resolutions and %d git runs, want 1 and %d", cold, n.Load(), mode.perCold)
			}
		})
	}

	tests := []struct {
		name    string
		change  func(t *testing.T)
		want    string // domain after the change
		wantErr string
	}{
		{name: "pushurl added", change: func(t *testing.T) {
			testGit(t, repo, "config", "remote.origin.pushurl", "git@evil.example:acme/app.git")
		}, want: "evil.example/acme/app"},
		{name: "pushurl removed", change: func(t *testing.T) {
			testGit(t, repo, "config", "--unset", "remote.origin.pushurl")
		}, want: "github.com/acme/app"},
		{name: "config replaced by a symlink", change: func(t *testing.T) {
			other := filepath.Join(tr.sandbox, "other.cfg")
			b, err := os.ReadFile(filepath.Join(repo, ".git", "config"))
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, []byte("[remote \"origin\"]\n\tpushurl = git@attacker.test:x/y.git\n")...)
			if err := os.WriteFile(other, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(repo, ".git", "config")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, filepath.Join(repo, ".git", "config")); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "symbolic link"},
	}
	g, _ := countingResolver(true)
	resolve(g)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			time.Sleep(20 * time.Millisecond) // a later timestamp tick
			tt.change(t)
			if tt.wantErr != "" {
				_, err := g.Resolve(ctx, repo, tr.sandbox, "origin", true)
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			res := resolve(g)
			if len(res.URLs) != 1 || res.URLs[0].Domain() != tt.want {
				t.Fatalf("after change: %v, want %s", res.URLs, tt.want)
			}
		})
	}

	t.Run("executable config appearing later refuses", func(t *testing.T) {
		tr.apply(t, []op{{GitRepo: "$SANDBOX/app2"}, {Git: []string{"$SANDBOX/app2", "remote", "add", "origin", "git@github.com:acme/app.git"}}})
		repo2 := filepath.Join(tr.sandbox, "app2")
		g, _ := countingResolver(true)
		if _, err := g.Resolve(ctx, repo2, tr.sandbox, "origin", true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		testGit(t, repo2, "config", "core.sshCommand", "touch /tmp/x")
		if _, err := g.Resolve(ctx, repo2, tr.sandbox, "origin", true); !errors.Is(err, gitexec.ErrExecutableConfig) {
			t.Fatalf("err = %v, want ErrExecutableConfig", err)
		}
	})
}

func TestGitResolverRefusals(t *testing.T) {
	tr := newTree(t)
	tr.apply(t, []op{
		{GitRepo: "$SANDBOX/app"},
		{Git: []string{"$SANDBOX/app", "remote", "add", "origin", "git@github.com:acme/app.git"}},
		{GitRepo: "$OUTSIDE/repo"},
	})
	g := New(Options{Timeout: time.Second})
	ctx := context.Background()
	tests := []struct {
		name          string
		dir, sandbox  string
		remote        string
		wantErrSubstr string
	}{
		{name: "option as a name", dir: tr.sandbox + "/app", sandbox: tr.sandbox, remote: "--upload-pack=x", wantErrSubstr: "not a remote name"},
		{name: "no sandbox", dir: tr.sandbox + "/app", remote: "origin", wantErrSubstr: "no sandbox"},
		{name: "repository outside", dir: tr.outside + "/repo", sandbox: tr.sandbox, remote: "origin", wantErrSubstr: "outside"},
		{name: "unknown remote", dir: tr.sandbox + "/app", sandbox: tr.sandbox, remote: "upstream", wantErrSubstr: "upstream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.Resolve(ctx, tt.dir, tt.sandbox, tt.remote, true)
			if err == nil || !errors.Is(err, policy.ErrRemote) {
				t.Fatalf("err = %v, want policy.ErrRemote", err)
			}
			if !strings.Contains(err.Error(), tt.wantErrSubstr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantErrSubstr)
			}
		})
	}
}
