package githttp

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gitwire"
	"ironcurtain.dev/gateway/policy"
)

// TestCloneAndFetchFromTheMirror: clone and fetch are each one git__fetch
// decision; the mirror is refreshed from the upstream (with the gateway's
// credentials) at each, so a fetch sees new upstream commits.
func TestCloneAndFetchFromTheMirror(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	d := e.sink.last(t)
	if d.Tool != "fetch" || d.Decision != "allow" || !strings.Contains(string(d.Args), "https://github.com/acme/app.git") {
		t.Fatalf("clone record %+v %s", d, d.Args)
	}
	if eg := e.sink.egressOf(d.CallID); len(eg) != 1 || eg[0].Method != "fetch" || eg[0].Kind != "git" {
		t.Fatalf("egress rows of the clone: %+v", eg)
	}
	// Someone else pushes upstream.
	other := t.TempDir()
	run(t, "", "clone", "-q", e.bareD, other)
	writeFile(t, other+"/x.txt", "x\n")
	run(t, other, "add", "x.txt")
	run(t, other, "commit", "-q", "-m", "upstream change")
	run(t, other, "push", "-q", "origin", "main")
	e.mustGit(t, work, "fetch", "-q", "origin")
	if got, want := strings.TrimSpace(e.mustGit(t, work, "rev-parse", "origin/main")), e.upstreamRef(t, "refs/heads/main"); got != want {
		t.Fatalf("fetched origin/main %s, upstream %s", got, want)
	}
	e.up.mu.Lock()
	sawAuth := len(e.up.auths) > 0
	e.up.mu.Unlock()
	if !sawAuth {
		t.Fatal("the upstream saw no request")
	}
}

// TestUploadPackNeedsADecision: an upload-pack request of a session that
// has no allowed info/refs for the repository is refused.
func TestUploadPackNeedsADecision(t *testing.T) {
	e := newEnv(t, envOptions{})
	body := gitwire.AppendFlush(gitwire.AppendString(nil, "want "+e.upstreamRef(t, "refs/heads/main")+" ofs-delta\n"))
	body = append(body, gitwire.AppendString(nil, "done\n")...)
	req, _ := http.NewRequest(http.MethodPost, e.door.URL+"/git/github.com/acme/app.git/git-upload-pack", strings.NewReader(string(body)))
	req.SetBasicAuth("agent", agentToken)
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "info/refs") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestFetchRefusedAndEscalated: a fetch the policy denies is refused with
// the reason git prints; an escalated one waits for the human.
func TestFetchRefusedAndEscalated(t *testing.T) {
	deny := []policy.CompiledRule{{Name: "deny-fetch", If: policy.RuleCondition{Server: []string{"git"}, Tool: []string{"fetch"}}, Then: policy.Deny, Reason: "no fetching today"}}
	e := newEnv(t, envOptions{rules: deny})
	out, err := e.git("", "clone", "-q", e.url, t.TempDir()+"/c")
	if err == nil || !strings.Contains(out, "remote error") || !strings.Contains(out, "no fetching today") {
		t.Fatalf("clone: %v\n%s", err, out)
	}

	esc := &fakeEscalator{started: make(chan escalation.Request, 1), answer: make(chan escalation.Result, 1)}
	esc2 := []policy.CompiledRule{{Name: "escalate-fetch", If: policy.RuleCondition{Server: []string{"git"}, Tool: []string{"fetch"}}, Then: policy.Escalate, Reason: "fetching needs approval"}}
	e = newEnv(t, envOptions{rules: esc2, esc: esc})
	done := make(chan error, 1)
	go func() {
		_, err := e.git("", "clone", "-q", e.url, t.TempDir()+"/c")
		done <- err
	}()
	select {
	case <-esc.started:
	case <-time.After(30 * time.Second):
		t.Fatal("no escalation")
	}
	esc.answer <- escalation.Result{Approved: true, Status: "approved"}
	if err := <-done; err != nil {
		t.Fatalf("approved clone failed: %v", err)
	}
}

// TestPlainClientConfiguration: the client configuration docs/git-http.md
// gives (insteadOf and a credential helper answering the agent token for
// the gateway only) makes plain https://github.com/ URLs go through the door.
func TestPlainClientConfiguration(t *testing.T) {
	e := newEnv(t, envOptions{})
	gateway := e.door.URL
	cfg := t.TempDir() + "/gitconfig"
	gitc := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=" + cfg, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "IRONCURTAIN_AGENT_TOKEN=" + agentToken}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"config", "--global", "url." + gateway + "/git/github.com/.insteadOf", "https://github.com/"},
		{"config", "--global", "credential." + gateway + ".helper", `!f() { test "$1" = get && printf "username=agent\npassword=%s\n" "$IRONCURTAIN_AGENT_TOKEN"; }; f`},
		{"config", "--global", "user.name", "Agent"},
		{"config", "--global", "user.email", "agent@example.invalid"},
	} {
		if out, err := gitc("", args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	work := t.TempDir() + "/app"
	if out, err := gitc("", "clone", "-q", "https://github.com/acme/app", work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	writeFile(t, work+"/n.txt", "n\n")
	for _, args := range [][]string{{"switch", "-q", "-c", "feature"}, {"add", "n.txt"}, {"commit", "-q", "-m", "n"}, {"push", "-q", "origin", "feature"}} {
		if out, err := gitc(work, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if e.upstreamRef(t, "refs/heads/feature") == "" {
		t.Fatal("the push did not land")
	}
}
