package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// secretPushSession is the session of the git tool's secret-scanning
// scenario (the agent container); the git door's runs in the agent shell
// (shellSession).
const secretPushSession = "secretpush"

func init() { sessions = append(sessions, secretPushSession) }

// Where the scenario's clones live, apart from the other scenarios'
// repositories: the git tool's in the agent's workspace, the shell's.
const (
	secretPushRepo = "/workspace/secretpush"
	secretDoorRepo = "/workspace/secretdoor"
)

// secretPushTranscript clones the internet container's project with the git
// tool, commits a GitHub token in a commit message followed by a clean
// commit, and pushes the branch with git__push: the push is escalated for
// the token (a human denies it) and refused.
func secretPushTranscript() string {
	return `name: e2e-secret-push
steps:
  - say: I clone the project.
    code: |
      return git.clone({ url: "https://` + stack.HostGit + `/` + stack.GitRepo + `.git", path: "` + secretPushRepo + `" });
  - expect: { status: ok, contains: ["Cloned"] }
    say: I commit my debugging notes and a clean change.
    code: |
      const repo = "` + secretPushRepo + `";
      git.checkout({ path: repo, target: "secret-push", create_branch: true });
      filesystem.write_file({ path: repo + "/notes.txt", content: "debugging\n" });
      git.add({ path: repo, files: [repo + "/notes.txt"] });
      git.commit({ path: repo, message: "debug: the deploy token is ` + e2eGHToken + `" });
      filesystem.write_file({ path: repo + "/clean.txt", content: "clean\n" });
      git.add({ path: repo, files: [repo + "/clean.txt"] });
      git.commit({ path: repo, message: "A clean change" });
      return git.log({ path: repo, max_count: 2, oneline: true });
  - expect: { status: ok, contains: ["A clean change"] }
    say: I push the branch.
    code: |
      try {
        git.push({ path: "` + secretPushRepo + `", remote: "origin", branch: "secret-push" });
        return "UNEXPECTED: pushed";
      } catch (e: any) {
        return "refused: " + e.message;
      }
  - expect: { status: ok, contains: ["refused: "], not_contains: ["UNEXPECTED"] }
    final: The push that carried a token in a commit message needed a human, who denied it.
`
}

// TestSecretPush: what a push adds is scanned before the upstream push, on
// both paths. The real git CLI of the agent shell pushes a commit that adds
// a file holding an AWS key through the git door: escalated as
// structural-secret-egress with the masked excerpt shown to the operator;
// denied, the remote is unchanged and git prints kind and place; pushed
// again and approved, it lands. git__push of a branch whose older commit
// carries a token in its message: escalated with the excerpt, denied,
// refused. gh pr create through the GitHub relay with a token in the
// description: escalated with the excerpt, denied, nothing reaches GitHub.
// The audit rows name kind and place only.
func TestSecretPush(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 8*time.Minute)

	check := func(t *testing.T, e stack.Escalation, want, secret string) {
		t.Helper()
		if e.Rule != "structural-secret-egress" {
			t.Errorf("escalation rule = %q, want structural-secret-egress", e.Rule)
		}
		if !strings.Contains(e.Reason, want) {
			t.Errorf("the operator's reason %q lacks %q", e.Reason, want)
		}
		if strings.Contains(e.Reason, secret) || strings.Contains(string(e.Args), secret) {
			t.Errorf("the operator sees the secret: %s %s", e.Reason, e.Args)
		}
	}
	noLeak := func(t *testing.T, session string, secret string, wantRows int) {
		t.Helper()
		rows := 0
		for _, c := range toolCalls(t, ctx, s, session) {
			for _, leak := range []string{secret, "AKIA…", "ghp_…", "…MPLE", "…4242"} {
				if strings.Contains(c.Reason, leak) || strings.Contains(c.Error, leak) || strings.Contains(c.Args, leak) {
					t.Errorf("tool call row shows %q: %s (%s)", leak, c, c.Reason)
				}
			}
			if c.Rule == "structural-secret-egress" && c.Server == "git" && c.Tool == "push" {
				rows++
			}
		}
		if rows < wantRows {
			t.Errorf("%d structural-secret-egress push rows in session %s, want at least %d", rows, session, wantRows)
		}
	}

	t.Run("git door", func(t *testing.T) {
		sh := func(script string) stack.ExecResult {
			t.Helper()
			r, err := s.ExecShell(ctx, []string{"GIT_TERMINAL_PROMPT=0"}, "bash", "-c", "set -e\n"+script)
			if err != nil {
				t.Fatalf("exec in the agent shell: %v", err)
			}
			return r
		}
		// pending runs script in the background and returns the first
		// escalation of server__tool it raises (not in seen), or the
		// script's result when it ends without one.
		var seen []string
		background := func(script string) chan stack.ExecResult {
			done := make(chan stack.ExecResult, 1)
			go func() {
				r, err := s.ExecShell(ctx, []string{"GIT_TERMINAL_PROMPT=0"}, "bash", "-c", "set -e\n"+script)
				if err != nil {
					r = stack.ExecResult{Code: -1, Stderr: err.Error()}
				}
				done <- r
			}()
			return done
		}
		waitFor := func(done chan stack.ExecResult, server, tool string) (stack.Escalation, *stack.ExecResult) {
			t.Helper()
			for {
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				e, err := s.WaitPending(wctx, shellSession, server, tool, 2*time.Second, seen...)
				cancel()
				if err == nil {
					seen = append(seen, e.ID)
					return e, nil
				}
				select {
				case r := <-done:
					return stack.Escalation{}, &r
				case <-ctx.Done():
					t.Fatalf("no escalation of %s__%s and the command did not end", server, tool)
				default:
				}
			}
		}
		finish := func(done chan stack.ExecResult) stack.ExecResult {
			t.Helper()
			select {
			case r := <-done:
				return r
			case <-ctx.Done():
				t.Fatal("the command did not finish after the decision")
			}
			return stack.ExecResult{}
		}

		// The clone may be escalated (a fetch) unless the session holds a
		// fetch grant from an earlier scenario.
		done := background("rm -rf " + secretDoorRepo + " && git clone -q " + doorURL + " " + secretDoorRepo)
		if e, r := waitFor(done, "git", "fetch"); r == nil {
			if _, err := s.Decide(ctx, e.ID, true, "e2e operator approves the clone", ""); err != nil {
				t.Fatal(err)
			}
			if r := finish(done); r.Code != 0 {
				t.Fatalf("git clone: %s", r)
			}
		} else if r.Code != 0 {
			t.Fatalf("git clone: %s", r)
		}
		r := sh("cd " + secretDoorRepo + `
git checkout -q -b secret-door
mkdir -p config
printf 'AWS_ACCESS_KEY_ID=` + e2eAWSKey + `\n' > config/prod.env
git add config/prod.env
git commit -q -m "Add the production settings"
git rev-parse HEAD`)
		if r.Code != 0 {
			t.Fatalf("committing: %s", r)
		}
		commit := strings.TrimSpace(r.Stdout)
		remoteBranch := func() string {
			out, err := s.RemoteRepoGit(ctx, stack.OwnerRepo, "for-each-ref", "--format=%(objectname)", "refs/heads/secret-door")
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(out)
		}

		// Denied: nothing reaches the remote; git says what was found.
		done = background("cd " + secretDoorRepo + " && git push origin secret-door 2>&1")
		e, res := waitFor(done, "git", "push")
		if res != nil {
			t.Fatalf("the push ended without an escalation: %s", res)
		}
		check(t, e, "AKIA…MPLE (aws-access-key-id) in file config/prod.env", e2eAWSKey)
		t.Logf("operator sees: %s", e.Reason)
		if _, err := s.Decide(ctx, e.ID, false, "e2e operator: no keys in the repository", ""); err != nil {
			t.Fatal(err)
		}
		out := finish(done)
		if out.Code == 0 {
			t.Fatalf("the denied push succeeded: %s", out)
		}
		if !strings.Contains(out.Stdout, "aws-access-key-id in file config/prod.env") || strings.Contains(out.Stdout, e2eAWSKey) || strings.Contains(out.Stdout, "AKIA…") {
			t.Errorf("git's output should name kind and place only:\n%s", out.Stdout)
		}
		if got := remoteBranch(); got != "" {
			t.Fatalf("the denied push reached the remote: %s", got)
		}

		// Approved: it lands.
		done = background("cd " + secretDoorRepo + " && git push origin secret-door 2>&1")
		e, res = waitFor(done, "git", "push")
		if res != nil {
			t.Fatalf("the push ended without an escalation: %s", res)
		}
		check(t, e, "AKIA…MPLE (aws-access-key-id) in file config/prod.env", e2eAWSKey)
		if _, err := s.Decide(ctx, e.ID, true, "e2e operator: a documentation example key", ""); err != nil {
			t.Fatal(err)
		}
		if out := finish(done); out.Code != 0 {
			t.Fatalf("the approved push failed: %s", out)
		}
		if got := remoteBranch(); got != commit {
			t.Fatalf("remote secret-door = %q, want %s", got, commit)
		}
		noLeak(t, shellSession, e2eAWSKey, 2)
	})

	t.Run("github relay", func(t *testing.T) {
		// gh pr create in the agent shell (its GraphQL createPullRequest
		// through the relay) with a token in the description: escalated
		// for the secret (the operator sees the excerpt), denied, and
		// nothing reaches GitHub.
		const ghRepo = "/workspace/gh-secret"
		if r, err := s.ExecShell(ctx, nil, "bash", "-c", "rm -rf "+ghRepo+" && git init -q -b feature "+ghRepo+
			" && git -C "+ghRepo+" remote add origin https://github.com/"+stack.OwnerRepo+".git"); err != nil || r.Code != 0 {
			t.Fatalf("preparing the gh repository: %v %s", err, r)
		}
		before := countGitHub(t, ctx, s, "createPullRequest")
		done := make(chan stack.ExecResult, 1)
		go func() {
			r, err := s.ExecShell(ctx, []string{"GIT_TERMINAL_PROMPT=0"}, "bash", "-c",
				"cd "+ghRepo+" && gh pr create --title 'Deploy notes' --body 'use "+e2eGHToken+" to deploy' --base main 2>&1")
			if err != nil {
				r = stack.ExecResult{Code: -1, Stderr: err.Error()}
			}
			done <- r
		}()
		e, err := s.WaitPending(ctx, shellSession, "github", "pr_create", 90*time.Second)
		if err != nil {
			select {
			case r := <-done:
				t.Fatalf("%v; gh ended: %s", err, r)
			default:
				t.Fatal(err)
			}
		}
		check(t, e, "ghp_…4242 (github-token) in field body of mutation input", e2eGHToken)
		t.Logf("operator sees: %s", e.Reason)
		if _, err := s.Decide(ctx, e.ID, false, "e2e operator: a token in a pull request", ""); err != nil {
			t.Fatal(err)
		}
		var r stack.ExecResult
		select {
		case r = <-done:
		case <-ctx.Done():
			t.Fatal("gh did not finish after the decision")
		}
		if r.Code == 0 || strings.Contains(r.Stdout, e2eGHToken) || strings.Contains(r.Stdout, "ghp_…") {
			t.Fatalf("gh pr create should fail naming kind and place only: %s", r)
		}
		if n := countGitHub(t, ctx, s, "createPullRequest"); n != before {
			t.Fatalf("GitHub received %d pull request creations during the denied one", n-before)
		}
		for _, c := range toolCalls(t, ctx, s, shellSession) {
			if strings.Contains(c.Reason+c.Args+c.Error, e2eGHToken) || strings.Contains(c.Reason, "ghp_…") {
				t.Errorf("tool call row shows the token or its excerpt: %s (%s)", c, c.Reason)
			}
		}
	})

	t.Run("git tool", func(t *testing.T) {
		type result struct {
			r   stack.ExecResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := s.RunTranscript(ctx, secretPushSession, "secret-push", []byte(secretPushTranscript()), "e2e secret push", "-v")
			done <- result{r, err}
		}()
		wait := func(server, tool string, seen ...string) stack.Escalation {
			t.Helper()
			e, err := s.WaitPending(ctx, secretPushSession, server, tool, 3*time.Minute, seen...)
			if err != nil {
				select {
				case res := <-done:
					t.Fatalf("%v; the agent run ended: %v\n%s", err, res.err, res.r)
				default:
					t.Fatal(err)
				}
			}
			return e
		}
		clone := wait("git", "clone")
		if _, err := s.Decide(ctx, clone.ID, true, "e2e operator approves the clone", ""); err != nil {
			t.Fatal(err)
		}
		push := wait("git", "push", clone.ID)
		check(t, push, "ghp_…4242 (github-token) in commit ", e2eGHToken)
		t.Logf("operator sees: %s", push.Reason)
		if _, err := s.Decide(ctx, push.ID, false, "e2e operator: a token in a commit message", ""); err != nil {
			t.Fatal(err)
		}
		var res result
		select {
		case res = <-done:
		case <-ctx.Done():
			t.Fatal("the agent run did not finish")
		}
		if res.err != nil || res.r.Code != 0 {
			t.Fatalf("agent run: %v\n%s", res.err, res.r)
		}
		if out, err := s.RemoteGit(ctx, "for-each-ref", "refs/heads/secret-push"); err != nil || strings.TrimSpace(out) != "" {
			t.Fatalf("the denied push reached the remote: %q %v", out, err)
		}
		noLeak(t, secretPushSession, e2eGHToken, 1)
		verifyChain(t, ctx, s, secretPushSession, 4)
	})
}
