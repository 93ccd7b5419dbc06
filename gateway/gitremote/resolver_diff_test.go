package gitremote

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

// resolutionString summarises a resolution or its failure for comparison.
func resolutionString(res policy.RemoteResolution, err error) string {
	if err != nil {
		if !errors.Is(err, policy.ErrRemote) {
			return "unexpected error: " + err.Error()
		}
		return "refused"
	}
	urls := make([]string, len(res.URLs))
	for i, u := range res.URLs {
		urls[i] = u.URL()
	}
	return "remote=" + res.Remote + " branch=" + res.Branch + " mirror=" + map[bool]string{true: "yes", false: "no"}[res.Mirror] +
		" urls=" + strings.Join(urls, ",") + " push=" + strings.Join(res.PushRefspecs, ",")
}

// TestGitResolverNativeMatchesGit resolves every case twice, natively and
// through git (the fallback), and requires the same answer: the same URLs,
// default remote, branch, mirror flag and push refspecs, or a refusal from
// both.
func TestGitResolverNativeMatchesGit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git several times per case")
	}
	const wt = "$SANDBOX/app/.git/config.worktree"
	tests := []struct {
		name   string
		config string // appended to git init's config
		setup  []op
		// native says whether the native reader must be sure.
		native bool
	}{
		{name: "plain ssh origin", config: "[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n", native: true},
		{name: "pushurl elsewhere", config: "[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n\tpushurl = git@evil.example:acme/app.git\n", native: true},
		{name: "pushInsteadOf", config: "[url \"git@evil.example:\"]\n\tpushInsteadOf = git@github.com:\n[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n", native: true},
		{name: "pushInsteadOf ignored with a pushurl", config: "[url \"git@evil.example:\"]\n\tpushInsteadOf = git@github.com:\n[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n\tpushurl = git@github.com:acme/push.git\n", native: true},
		{name: "insteadOf shorthand", config: "[url \"https://github.com/\"]\n\tinsteadOf = gh:\n[remote \"origin\"]\n\turl = gh:acme/app\n", native: true},
		{name: "longest insteadOf", config: "[url \"https://github.com/\"]\n\tinsteadOf = gh:\n[url \"https://evil.example/\"]\n\tinsteadOf = gh:acme/\n[remote \"origin\"]\n\turl = gh:acme/app\n", native: true},
		{name: "several URLs, all must pass", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n\turl = https://gitlab.com/acme/app\n", native: true},
		{name: "one URL is a local path", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n\turl = /tmp/x\n", native: true},
		{name: "remote without URL", config: "[remote \"origin\"]\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", native: true},
		{name: "no such remote", config: "[remote \"upstream\"]\n\turl = https://github.com/acme/app\n", native: true},
		{name: "mirror", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n\tmirror\n", native: true},
		{name: "push refspecs", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n\tpush = refs/heads/main:refs/heads/release\n\tpush = HEAD:refs/heads/x\n", native: true},
		{name: "default remote from branch.pushRemote", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n[remote \"fork\"]\n\turl = https://github.com/me/app\n[branch \"main\"]\n\tpushRemote = fork\n\tremote = origin\n", native: true},
		{name: "default remote from remote.pushDefault", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n[remote \"fork\"]\n\turl = https://github.com/me/app\n[remote]\n\tpushDefault = fork\n", native: true},
		{name: "default remote from branch.remote", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n[remote \"up\"]\n\turl = https://github.com/up/app\n[branch \"main\"]\n\tremote = up\n", native: true},
		{name: "case and quoting", config: "[Remote \"origin\"]\n\tURL = \"git@github.com:acme/app.git\" # comment\n\tPushURL = git@github.com:acme/\\\n\tpush.git\n", native: true},
		{name: "deprecated section form", config: "[remote.origin]\n\turl = https://github.com/acme/app\n", native: true},
		{name: "executable setting refuses", config: "[core]\n\tsshCommand = touch /tmp/x\n[remote \"origin\"]\n\turl = https://github.com/acme/app\n", native: true},
		{name: "insteadOf to a local path refuses", config: "[url \"/tmp/evil\"]\n\tinsteadOf = https://github.com/\n[remote \"origin\"]\n\turl = https://github.com/acme/app\n", native: true},
		{name: "worktree config pushurl", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n[remote \"origin\"]\n\turl = https://github.com/acme/app\n",
			setup: []op{{File: []string{wt, "[remote \"origin\"]\n\tpushurl = https://evil.example/acme/app\n"}}}, native: true},
		{name: "worktree config not enabled", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n",
			setup: []op{{File: []string{wt, "[remote \"origin\"]\n\tpushurl = https://evil.example/acme/app\n"}}}, native: true},
		{name: "packed refs", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n",
			setup: []op{{Git: []string{"$SANDBOX/app", "pack-refs", "--all"}}}, native: true},
		{name: "detached HEAD", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n",
			setup: []op{{Git: []string{"$SANDBOX/app", "checkout", "-q", "--detach"}}}, native: true},

		// The native reader leaves these to git.
		{name: "include", config: "[include]\n\tpath = /etc/passwd\n[remote \"origin\"]\n\turl = https://github.com/acme/app\n"},
		{name: "unknown escape", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\\q\n"},
		{name: "syntax error", config: "[remote \"origin\"\n\turl = https://github.com/acme/app\n"},
		{name: "url without a value", config: "[remote \"origin\"]\n\turl\n"},
		{name: "bad packed-refs", config: "[remote \"origin\"]\n\turl = https://github.com/acme/app\n",
			setup: []op{{Git: []string{"$SANDBOX/app", "pack-refs", "--all"}}, {File: []string{"$SANDBOX/app/.git/packed-refs", "garbage\n"}}}},
		{name: "reftable extension", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\trefStorage = reftable\n[remote \"origin\"]\n\turl = https://github.com/acme/app\n"},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t)
			tr.apply(t, []op{{GitRepo: "$SANDBOX/app"}})
			cfgPath := filepath.Join(tr.sandbox, "app", ".git", "config")
			base := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
			if strings.Contains(tt.config, "repositoryformatversion") {
				base = ""
			}
			tr.apply(t, tt.setup)
			tr.apply(t, []op{{File: []string{cfgPath, base + tt.config}}})
			repo := filepath.Join(tr.sandbox, "app")

			native := New(Options{})
			native.noCache = true
			viaGit := New(Options{})
			viaGit.noCache, viaGit.noNative = true, true
			for _, q := range []struct {
				name string
				push bool
			}{{"origin", true}, {"origin", false}, {"", true}, {"", false}, {"upstream", true}} {
				res, err := native.Resolve(ctx, repo, tr.sandbox, q.name, q.push)
				got := resolutionString(res, err)
				res, err = viaGit.Resolve(ctx, repo, tr.sandbox, q.name, q.push)
				want := resolutionString(res, err)
				if got != want {
					t.Errorf("remote %q push=%v:\nnative: %s\n   git: %s", q.name, q.push, got, want)
				}
				if strings.HasPrefix(got, "unexpected") || strings.HasPrefix(want, "unexpected") {
					t.Errorf("remote %q push=%v: %s / %s", q.name, q.push, got, want)
				}
			}
			if sure := native.fallback.Load() == 0; sure != tt.native {
				t.Errorf("native reader sure = %v (native %d, fallback %d), want %v", sure, native.native.Load(), native.fallback.Load(), tt.native)
			}
			if viaGit.native.Load() != 0 {
				t.Error("the git resolver read natively")
			}
		})
	}
}

// TestGitResolverNativeNewlineURL: a URL holding a newline (written with
// the \n escape) is one value to git, which prints it on two lines; the
// git path reads two URLs (each checked), the native path one malformed
// URL, refused.
func TestGitResolverNativeNewlineURL(t *testing.T) {
	tr := newTree(t)
	tr.apply(t, []op{{GitRepo: "$SANDBOX/app"}, {File: []string{"$SANDBOX/app/.git/config",
		"[remote \"origin\"]\n\turl = https://github.com/acme/app\\nhttps://evil.example/x/y\n"}}})
	repo := filepath.Join(tr.sandbox, "app")
	native := New(Options{})
	native.noCache = true
	_, err := native.Resolve(context.Background(), repo, tr.sandbox, "origin", true)
	if !errors.Is(err, policy.ErrRemote) || native.native.Load() != 1 {
		t.Fatalf("native: err = %v (native %d), want a refusal", err, native.native.Load())
	}
	viaGit := New(Options{})
	viaGit.noCache, viaGit.noNative = true, true
	res, err := viaGit.Resolve(context.Background(), repo, tr.sandbox, "origin", true)
	if err != nil {
		t.Fatal(err)
	}
	var domains []string
	for _, u := range res.URLs {
		domains = append(domains, u.Domain())
	}
	if !slices.Equal(domains, []string{"github.com/acme/app", "evil.example/x/y"}) {
		t.Fatalf("git path: %v", domains)
	}
}
