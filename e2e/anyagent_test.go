package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// Paths and URLs of the any-agent scenario, in the agent-shell container.
const (
	shellRepo = "/workspace/app"
	// doorURL is the git door's URL of the internet container's acme/app
	// (the agent-shell image's credential helper answers for
	// http://gateway:8080 with the agent token).
	doorURL = "http://gateway:8080/git/" + stack.HostGit + "/" + stack.OwnerRepo + ".git"
)

// shellMarker names the files the hooks and settings planted in the agent
// shell's clone create when something runs them (checkNoMarkers looks for
// markerPrefix in the gateway).
func shellMarker(name string) string { return "/tmp/" + markerPrefix + "anyagent-" + name }

// TestAnyAgent drives the real git and gh CLIs of the agent-shell image
// (an off-the-shelf agent's view) through the gateway's git door and
// GitHub relay, against the internet container's git server and fake
// GitHub API: clones, escalated and operator-decided pushes, the push
// refusals of the door, planted hooks and settings that never run in the
// gateway, gh's pull request commands, and the container's credentials.
func TestAnyAgent(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 6*time.Minute)
	const session = shellSession

	sh := func(t *testing.T, script string, env ...string) stack.ExecResult {
		t.Helper()
		r, err := s.ExecShell(ctx, append([]string{"GIT_TERMINAL_PROMPT=0"}, env...), "bash", "-c", "set -e\n"+script)
		if err != nil {
			t.Fatalf("exec in the agent shell: %v", err)
		}
		return r
	}
	// decided runs script in the background, approves or denies the
	// escalation of server__tool it raises through the ops API, and
	// returns script's result.
	var seen []string
	decided := func(t *testing.T, server, tool string, approve bool, reason, script string, env ...string) stack.ExecResult {
		t.Helper()
		done := make(chan stack.ExecResult, 1)
		go func() {
			r, err := s.ExecShell(ctx, append([]string{"GIT_TERMINAL_PROMPT=0"}, env...), "bash", "-c", "set -e\n"+script)
			if err != nil {
				r = stack.ExecResult{Code: -1, Stderr: err.Error()}
			}
			done <- r
		}()
		e, err := s.WaitPending(ctx, session, server, tool, 90*time.Second, seen...)
		if err != nil {
			select {
			case r := <-done:
				t.Fatalf("%v; the command ended: %s", err, r)
			default:
				t.Fatal(err)
			}
		}
		seen = append(seen, e.ID)
		d, err := s.Decide(ctx, e.ID, approve, reason, "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "approved", false: "denied"}[approve]
		if d.Status != want {
			t.Fatalf("deciding %s answered %+v, want %s", e.ID, d, want)
		}
		t.Logf("%s escalation %s: %s__%s %s (%s)", want, e.ID, server, tool, e.Args, e.Reason)
		select {
		case r := <-done:
			return r
		case <-ctx.Done():
			t.Fatalf("the command did not finish after the decision: %v", ctx.Err())
		}
		return stack.ExecResult{}
	}
	remoteRef := func(t *testing.T, ref string) string {
		t.Helper()
		r, err := s.ExecInternet(ctx, "git", "--git-dir", "/srv/git/"+stack.OwnerRepo+".git", "rev-parse", "--verify", "--quiet", ref)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(r.Stdout) // "" when absent
	}
	remoteRefs := func(t *testing.T) string {
		t.Helper()
		out, err := s.RemoteRepoGit(ctx, stack.OwnerRepo, "for-each-ref", "--format=%(refname) %(objectname)")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	deniedPushes := func(t *testing.T) int {
		t.Helper()
		n := 0
		for _, c := range toolCalls(t, ctx, s, session) {
			if c.Server == "git" && c.Tool == "push" && c.Decision == "deny" && c.Outcome == "denied" {
				n++
			}
		}
		return n
	}
	mainBefore := remoteRef(t, "refs/heads/main")
	if mainBefore == "" {
		t.Fatal("the remote acme/app has no main branch")
	}

	t.Run("clone of an allowlisted repository", func(t *testing.T) {
		r := decided(t, "git", "fetch", true, "e2e operator approves the clone", "git clone "+doorURL+" "+shellRepo)
		if r.Code != 0 {
			t.Fatalf("git clone: %s", r)
		}
		head := sh(t, "git -C "+shellRepo+" rev-parse HEAD")
		if got := strings.TrimSpace(head.Stdout); got != mainBefore {
			t.Fatalf("cloned HEAD %q, want the remote's main %s", got, mainBefore)
		}
	})

	t.Run("clone of a host outside the allowlist", func(t *testing.T) {
		r := sh(t, "! git clone http://gateway:8080/git/"+stack.HostBlocked+"/acme/app.git /tmp/blocked 2>&1; test ! -e /tmp/blocked/.git")
		if r.Code != 0 {
			t.Fatalf("git clone of %s did not fail as expected: %s", stack.HostBlocked, r)
		}
		for _, want := range []string{"IronCurtain refused", stack.HostBlocked + " is not in the gateway's git allowlist"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("git's output lacks %q:\n%s", want, r.Stdout)
			}
		}
		found := false
		for _, c := range toolCalls(t, ctx, s, session) {
			if c.Decision == "deny" && c.Rule == "structural-git-http-host" && strings.Contains(c.Args, stack.HostBlocked) {
				found = true
			}
		}
		if !found {
			t.Error("no deny record (structural-git-http-host) for the refused clone")
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	// What a compromised agent writes into its own repository: hooks and
	// settings that run programs, server-side ones included, and files in
	// the pushed tree that would run if anything checked them out with
	// the agent's attributes. None of it may run in the gateway.
	t.Run("plant hooks and settings", func(t *testing.T) {
		var b strings.Builder
		fmt.Fprintf(&b, "cd %s\nmkdir -p .git/hooks hooks\n", shellRepo)
		for _, h := range []string{"pre-push", "pre-receive", "update", "post-receive", "post-update", "reference-transaction", "push-to-checkout", "proc-receive", "post-checkout", "pre-commit"} {
			fmt.Fprintf(&b, "printf '#!/bin/sh\\necho ran > %s\\nexit 0\\n' > .git/hooks/%s\nchmod 0755 .git/hooks/%s\n", shellMarker(h), h, h)
		}
		for _, kv := range [][2]string{
			{"core.sshCommand", "sh -c 'echo ran > " + shellMarker("sshcommand") + "'"},
			{"uploadpack.packObjectsHook", "sh -c 'echo ran > " + shellMarker("packobjectshook") + "'"},
			{"receive.procReceiveRefs", "refs/heads"},
			{"filter.evil.clean", "sh -c 'echo ran > " + shellMarker("filter-clean") + "; cat'"},
			{"filter.evil.smudge", "sh -c 'echo ran > " + shellMarker("filter-smudge") + "; cat'"},
			{"diff.evil.textconv", "sh -c 'echo ran > " + shellMarker("textconv") + "; cat'"},
		} {
			fmt.Fprintf(&b, "git config %s %q\n", kv[0], kv[1])
		}
		fmt.Fprintf(&b, "printf '#!/bin/sh\\necho ran > %s\\n' > hooks/post-receive\nchmod 0755 hooks/post-receive\n", shellMarker("tree-post-receive"))
		b.WriteString("printf '* filter=evil diff=evil\\n' > .gitattributes\n")
		if r := sh(t, b.String()); r.Code != 0 {
			t.Fatalf("planting: %s", r)
		}
	})

	var pushed string
	t.Run("push of a feature branch, approved", func(t *testing.T) {
		r := sh(t, "cd "+shellRepo+`
git checkout -q -b feature
echo "from the agent shell" > feature.txt
git add -A
git commit -q -m "Add the agent shell's feature"
git rev-parse HEAD`)
		if r.Code != 0 {
			t.Fatalf("committing: %s", r)
		}
		pushed = strings.TrimSpace(r.Stdout)
		r = decided(t, "git", "push", true, "e2e operator approves the push", "cd "+shellRepo+" && git push origin feature")
		if r.Code != 0 {
			t.Fatalf("git push origin feature: %s", r)
		}
		if got := remoteRef(t, "refs/heads/feature"); got != pushed {
			t.Fatalf("remote feature = %q, want the pushed commit %s", got, pushed)
		}
		if got := remoteRef(t, "refs/heads/main"); got != mainBefore {
			t.Errorf("remote main moved to %s", got)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("push of a feature branch, denied by the operator", func(t *testing.T) {
		if r := sh(t, "cd "+shellRepo+"\ngit checkout -q -b feature2\ngit commit -q --allow-empty -m second\ngit checkout -q feature"); r.Code != 0 {
			t.Fatalf("committing: %s", r)
		}
		before := remoteRefs(t)
		r := decided(t, "git", "push", false, "e2e operator says not today", "cd "+shellRepo+" && git push origin feature2")
		if r.Code == 0 {
			t.Fatalf("the denied push succeeded: %s", r)
		}
		for _, want := range []string{"[remote rejected] feature2 -> feature2", "a human denied it", "e2e operator says not today"} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("git's output lacks %q:\n%s", want, r.Stderr)
			}
		}
		if after := remoteRefs(t); after != before {
			t.Errorf("the remote changed:\n%s\nwas:\n%s", after, before)
		}
	})

	t.Run("refused pushes", func(t *testing.T) {
		// The feature branch rewritten (force pushes) and a new commit on
		// the local main (pushes to main, --all).
		if r := sh(t, "cd "+shellRepo+`
git checkout -q main
git commit -q --allow-empty -m "local main change"
git checkout -q feature
git commit -q --amend -m "Add the agent shell's feature, rewritten"`); r.Code != 0 {
			t.Fatalf("preparing: %s", r)
		}
		before := remoteRefs(t)
		for _, tc := range []struct {
			name, args string
			want       []string // in git's error output besides "IronCurtain policy:"
		}{
			{name: "force", args: "push --force origin feature", want: []string{"! [remote rejected] feature -> feature", "force push (a non-fast-forward update of refs/heads/feature)"}},
			{name: "plus refspec", args: "push origin +feature", want: []string{"! [remote rejected] feature -> feature", "force push (a non-fast-forward update of refs/heads/feature)"}},
			{name: "delete refspec", args: "push origin :feature", want: []string{"! [remote rejected] feature", "deleting a remote ref (refs/heads/feature)"}},
			{name: "delete flag", args: "push --delete origin feature", want: []string{"! [remote rejected] feature", "deleting a remote ref (refs/heads/feature)"}},
			{name: "HEAD to main", args: "push origin HEAD:main", want: []string{"! [remote rejected] HEAD -> main", `protected branch "main"`}},
			{name: "HEAD to refs/heads/main", args: "push origin HEAD:refs/heads/main", want: []string{"! [remote rejected] HEAD -> main", `protected branch "main"`}},
			// One decision for the whole push: every ref is rejected with
			// the first invariant broken.
			{name: "mirror", args: "push --mirror origin", want: []string{"! [remote rejected] main -> main", "! [remote rejected] origin/main -> origin/main", "force push"}},
			{name: "all branches with main", args: "push --all origin", want: []string{"! [remote rejected] main -> main", "! [remote rejected] feature2 -> feature2", `protected branch "main"`}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				denied := deniedPushes(t)
				r := sh(t, "cd "+shellRepo+" && git "+tc.args)
				if r.Code == 0 {
					t.Fatalf("git %s succeeded: %s", tc.args, r)
				}
				for _, want := range append([]string{"IronCurtain policy:", "(call "}, tc.want...) {
					if !strings.Contains(r.Stderr, want) {
						t.Errorf("git %s: output lacks %q:\n%s", tc.args, want, r.Stderr)
					}
				}
				if got := deniedPushes(t); got != denied+1 {
					t.Errorf("git %s: %d new deny records of git__push, want 1", tc.args, got-denied)
				}
				t.Logf("git %s:\n%s", tc.args, lastLines(r.Stderr, 6))
			})
		}
		if after := remoteRefs(t); after != before {
			t.Errorf("the remote changed:\n%s\nwas:\n%s", after, before)
		}
	})

	t.Run("nothing planted ran in the gateway", func(t *testing.T) {
		// Control: the planted hooks are live where git runs them, in the
		// agent's own container (pre-push ran before each push).
		if r := sh(t, "test -e "+shellMarker("pre-push")); r.Code != 0 {
			t.Fatalf("control: the planted pre-push hook did not run in the agent shell: %s", r)
		}
		// The planted tree did reach the remote through the door.
		if _, err := s.RemoteRepoGit(ctx, stack.OwnerRepo, "cat-file", "-e", pushed+":hooks/post-receive"); err != nil {
			t.Fatalf("the pushed tree lacks the planted hook: %v", err)
		}
		checkNoMarkers(t, ctx, s)
	})

	// gh runs in a clone-like repository whose origin is the GitHub URL of
	// acme/app (what an agent's clone of github.com looks like; the clone
	// above names git.internet.test, which gh cannot map to its GitHub
	// host), on branch feature: the image's gh wrapper names the
	// repository (GH_REPO) and the head branch itself.
	const ghRepo = "/workspace/gh-app"
	gh := func(t *testing.T, args string) stack.ExecResult {
		t.Helper()
		return sh(t, "cd "+ghRepo+" && gh "+args+" 2>&1")
	}
	if r := sh(t, "git init -q -b feature "+ghRepo+" && git -C "+ghRepo+" remote add origin https://github.com/"+stack.OwnerRepo+".git"); r.Code != 0 {
		t.Fatalf("preparing the gh repository: %s", r)
	}
	pr := "11" // the fake GitHub numbers pull requests from 11
	// gh pr create (its GraphQL createPullRequest, the repository's node id
	// resolved by the relay), decided as github__pr_create.
	t.Run("gh pr create opens a pull request, escalated and approved", func(t *testing.T) {
		r := decided(t, "github", "pr_create", true, "e2e operator approves the pull request",
			"cd "+ghRepo+" && gh pr create --title 'Agent shell feature' --body 'From the e2e agent shell' --base main 2>&1")
		m := regexp.MustCompile(`/pull/([0-9]+)`).FindStringSubmatch(r.Stdout)
		if r.Code != 0 || m == nil {
			t.Fatalf("gh pr create: %s", r)
		}
		pr = m[1]
		var recorded bool
		for _, c := range toolCalls(t, ctx, s, session) {
			if c.Server == "github" && c.Tool == "pr_create" && c.Decision == "escalate" && c.Outcome == "ok" && strings.Contains(c.Args, "github-relay") {
				recorded = true
			}
		}
		if !recorded {
			t.Error("no record of the relayed github__pr_create (escalated, ok)")
		}
		if n := countGitHub(t, ctx, s, "createPullRequest"); n != 1 {
			t.Errorf("the fake GitHub received %d pull request creations, want 1", n)
		}
	})

	t.Run("gh reads", func(t *testing.T) {
		if r := gh(t, "pr view "+pr); r.Code != 0 {
			t.Errorf("gh pr view %s: %s", pr, r)
		}
		if r := gh(t, "api repos/acme/app"); r.Code != 0 || !strings.Contains(r.Stdout, `"full_name":"acme/app"`) {
			t.Errorf("gh api repos/acme/app: %s", r)
		}
	})

	t.Run("gh refusals", func(t *testing.T) {
		for _, tc := range []struct{ name, args, want string }{
			{name: "pr merge", args: "pr merge " + pr + " --merge", want: "merging is not possible through the gateway"},
			{name: "api PUT merge", args: "api -X PUT repos/acme/app/pulls/" + pr + "/merge", want: "merging is not possible through the gateway"},
			{name: "api graphql mergePullRequest", args: `api graphql -f 'query=mutation{mergePullRequest(input:{pullRequestId:"PR_` + pr + `"}){clientMutationId}}'`, want: "merging is not possible through the gateway"},
			{name: "pr edit of a pull request the gateway did not open", args: "pr edit 1 --title hijacked", want: "not by the gateway's account"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := gh(t, tc.args)
				if r.Code == 0 {
					t.Fatalf("gh %s succeeded: %s", tc.args, r)
				}
				for _, want := range []string{"IronCurtain refused", tc.want} {
					if !strings.Contains(r.Stdout, want) {
						t.Errorf("gh %s: output lacks %q:\n%s", tc.args, want, r.Stdout)
					}
				}
				t.Logf("gh %s:\n%s", tc.args, lastLines(r.Stdout, 4))
			})
		}
		reqs, err := s.InternetRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, q := range reqs {
			if q.Host != stack.HostGitHub {
				continue
			}
			n++
			if strings.Contains(strings.ToLower(q.Path), "/merge") || q.Method == "PUT" || q.Method == "PATCH" || q.Method == "DELETE" ||
				strings.Contains(q.Note, "mergePullRequest") || strings.Contains(q.Note, "updatePullRequest") || strings.Contains(q.Note, "wrong token") {
				t.Errorf("the fake GitHub received %+v", q)
			}
		}
		if n == 0 {
			t.Error("the fake GitHub received nothing (the check would prove nothing)")
		}
		var refusals int
		for _, c := range toolCalls(t, ctx, s, session) {
			if c.Server == "github" && c.Decision == "deny" {
				refusals++
			}
		}
		if refusals < 4 {
			t.Errorf("%d deny records of github calls, want at least 4", refusals)
		}
	})

	t.Run("no credential in the agent shell", func(t *testing.T) {
		ins, err := s.Shell.Inspect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := sh(t, "env")
		if r.Code != 0 {
			t.Fatalf("env: %s", r)
		}
		for source, vars := range map[string][]string{"docker inspect": ins.Config.Env, "exec environment": strings.Split(r.Stdout, "\n")} {
			if len(vars) < 2 {
				t.Errorf("%s: empty (the check would prove nothing)", source)
			}
			for _, kv := range vars {
				name, value, _ := strings.Cut(kv, "=")
				for secret, v := range s.Secrets.Named() {
					if strings.Contains(value, v) {
						t.Errorf("%s: %s holds %s", source, name, secret)
					}
				}
				switch name {
				case "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "IRONCURTAIN_OPERATOR_TOKEN", "IRONCURTAIN_METRICS_TOKEN", "IRONCURTAIN_DATABASE_URL":
					if value != "" {
						t.Errorf("%s: %s is set in the agent shell", source, name)
					}
				}
			}
		}
		// Controls prove the scan sees the image's layers and what was
		// written at run time.
		const imageControl, runtimeControl = "control: the image's gitconfig", "control: a canary written at run time"
		canary := "ic-e2e-canary-" + s.RunID + "-" + session
		if r := sh(t, "echo "+canary+" > /tmp/ic-e2e-canary"); r.Code != 0 {
			t.Fatal(r)
		}
		scan := s.Secrets.Named()
		scan[imageControl] = "git-credential-ironcurtain"
		scan[runtimeControl] = canary
		files, found, err := s.ScanFilesystem(ctx, s.Shell, scan)
		if err != nil {
			t.Fatal(err)
		}
		saw := map[string]bool{}
		for _, f := range found {
			if f.Secret == imageControl || f.Secret == runtimeControl {
				saw[f.Secret] = true
				continue
			}
			t.Errorf("the agent shell's %s holds %s", f.Path, f.Secret)
		}
		if !saw[imageControl] || !saw[runtimeControl] {
			t.Errorf("the scan missed its controls (%v): it proves nothing", saw)
		}
		t.Logf("scanned %d files of the agent shell", files)
	})

	verifyChain(t, ctx, s, session, 2*int64(len(toolCalls(t, ctx, s, session))))
}

// countGitHub counts the fake GitHub's requests whose log note mentions
// word.
func countGitHub(t *testing.T, ctx context.Context, s *stack.Stack, word string) int {
	t.Helper()
	reqs, err := s.InternetRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range reqs {
		if q.Host == stack.HostGitHub && strings.Contains(q.Note, word) {
			n++
		}
	}
	return n
}
