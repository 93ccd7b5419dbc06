package githttp

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

// TestPushNewBranchLandsUpstream: a plain git push of a new branch through
// the door is decided once (git__push, every ref update in the record),
// lands upstream with the gateway's credentials, and the client never sees
// the upstream token.
func TestPushNewBranchLandsUpstream(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	head := e.commit(t, work, "f.txt", "feature\n")
	out := e.mustGit(t, work, "push", "origin", "feature")
	if got := e.upstreamRef(t, "refs/heads/feature"); got != head {
		t.Fatalf("upstream feature = %q, want %q\n%s", got, head, out)
	}
	if strings.Contains(out, upstreamToken) {
		t.Fatal("the client saw the upstream token")
	}
	d := e.sink.last(t)
	if d.Server != "git" || d.Tool != "push" || d.Decision != "allow" {
		t.Fatalf("decision %+v", d)
	}
	rec := string(d.Args)
	for _, want := range []string{`"refs/heads/feature"`, `"create"`, head, `"https://github.com/acme/app.git"`} {
		if !strings.Contains(rec, want) {
			t.Errorf("the record %s lacks %s", rec, want)
		}
	}
	if o := e.sink.Outcome(d.CallID); o == nil || o.Status != "ok" {
		t.Fatalf("outcome %+v", o)
	}
	if eg := e.sink.egressOf(d.CallID); len(eg) != 1 || eg[0].Kind != "git" || eg[0].Method != "push" || eg[0].Host != "github.com" ||
		eg[0].SessionID != "s1" || eg[0].BytesUp == 0 || eg[0].Error != "" {
		t.Fatalf("egress rows of the push: %+v", eg)
	}

	// A fast-forward of the same branch is allowed too.
	head2 := e.commit(t, work, "f.txt", "more\n")
	e.mustGit(t, work, "push", "origin", "feature")
	if got := e.upstreamRef(t, "refs/heads/feature"); got != head2 {
		t.Fatalf("upstream feature = %q, want %q", got, head2)
	}
	if rec := string(e.sink.last(t).Args); !strings.Contains(rec, `"fast-forward"`) {
		t.Fatalf("record %s", rec)
	}
}

// TestPushRefusals: every form of force, deletion and protected-branch push
// git can send is refused with git's own error line carrying our reason, a
// deny record, and nothing changes upstream.
func TestPushRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "feature")
	feature := e.upstreamRef(t, "refs/heads/feature")
	main := e.upstreamRef(t, "refs/heads/main")
	// Rewrite the feature branch's history.
	e.mustGit(t, work, "commit", "-q", "--amend", "-m", "rewritten")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "--force", args: []string{"push", "--force", "origin", "feature"}, want: "force push"},
		{name: "+refspec", args: []string{"push", "origin", "+feature"}, want: "force push"},
		{name: "--force-with-lease", args: []string{"push", "--force-with-lease", "origin", "feature"}, want: "force push"},
		{name: "delete by :ref", args: []string{"push", "origin", ":feature"}, want: "deleting a remote ref"},
		{name: "--delete", args: []string{"push", "--delete", "origin", "feature"}, want: "deleting a remote ref"},
		{name: "HEAD to main", args: []string{"push", "origin", "HEAD:main"}, want: `protected branch "main"`},
		{name: "HEAD to refs/heads/main", args: []string{"push", "origin", "HEAD:refs/heads/main"}, want: `protected branch "main"`},
		{name: "--mirror", args: []string{"push", "--mirror", "origin"}, want: "IronCurtain policy"},
		{name: "--all", args: []string{"push", "--all", "-f", "origin"}, want: "IronCurtain policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "HEAD to main" || tc.name == "HEAD to refs/heads/main" || tc.name == "--all" {
				// A fast-forward of main, so that only the protection refuses it.
				e.mustGit(t, work, "switch", "-q", "-c", "tomain"+strings.NewReplacer("/", "", " ", "-").Replace(tc.name), "origin/main")
				e.commit(t, work, "m.txt", tc.name+"\n")
				defer e.mustGit(t, work, "switch", "-q", "feature")
			}
			before := len(e.sink.Decisions())
			out, err := e.git(work, tc.args...)
			if err == nil {
				t.Fatalf("git %v succeeded:\n%s", tc.args, out)
			}
			if !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, tc.want) {
				e.sink.dump(t)
				t.Fatalf("git output lacks [remote rejected] and %q:\n%s", tc.want, out)
			}
			ds := e.sink.Decisions()
			if len(ds) != before+1 || ds[len(ds)-1].Decision != "deny" || ds[len(ds)-1].Rule != policy.RuleGitPush {
				t.Fatalf("want one deny record (rule %s), got %d new: %+v", policy.RuleGitPush, len(ds)-before, ds[len(ds)-1])
			}
			if e.upstreamRef(t, "refs/heads/feature") != feature || e.upstreamRef(t, "refs/heads/main") != main {
				t.Fatal("the upstream changed")
			}
		})
	}

	// Without --force git itself refuses the rewritten history (it knows the
	// upstream's tip from our advertisement); the upstream is unchanged.
	out, err := e.git(work, "push", "origin", "feature")
	if err == nil || !strings.Contains(out, "rejected") {
		t.Fatalf("rewritten history pushed without --force: %v\n%s", err, out)
	}
	if e.upstreamRef(t, "refs/heads/feature") != feature {
		t.Fatal("the upstream changed")
	}
}

func (s *memSink) dump(t testing.TB) {
	for _, d := range s.Decisions() {
		t.Logf("%s %s %s: %s", d.Tool, d.Decision, d.Rule, d.Reason)
	}
}

// TestPushToAnEmptyUpstream: an upstream with no refs yet is advertised as
// empty and a new branch lands.
func TestPushToAnEmptyUpstream(t *testing.T) {
	e := newEnv(t, envOptions{})
	empty := filepath.Join(e.up.root, "acme", "empty.git")
	run(t, "", "init", "-q", "--bare", empty)
	run(t, empty, "config", "http.receivepack", "true")
	work := t.TempDir()
	e.mustGit(t, work, "init", "-q", "-b", "feature")
	head := e.commit(t, work, "a.txt", "a\n")
	url := strings.Replace(e.url, "/acme/app.git", "/acme/empty.git", 1)
	e.mustGit(t, work, "push", "-q", url, "feature")
	out, err := exec.Command("git", "--git-dir", empty, "rev-parse", "refs/heads/feature").Output()
	if err != nil || strings.TrimSpace(string(out)) != head {
		t.Fatalf("feature %q %v, want %s", out, err, head)
	}
}
