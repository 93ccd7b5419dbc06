package e2e_test

import (
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// secretsSession is the session of the secret-scanning scenario.
const secretsSession = "secrets"

func init() { sessions = append(sessions, secretsSession) }

// Fake secrets of real formats, assembled at run time so that the
// repository holds none in one piece.
var (
	e2eAWSKey  = "AKIA" + "IOSFODNN7EXAMPLE"
	e2eGHToken = "ghp_" + strings.Repeat("e2eSeCrEt0", 3) + "424242"
)

// secretsTranscript: a fetch with an AWS key in its query (a human denies
// it), the same with the key in another parameter (a human approves it, the
// page is fetched), and a pull request whose body carries a GitHub token (a
// human denies it).
func secretsTranscript() string {
	return `name: e2e-secrets
steps:
  - say: I search with a key in the query.
    code: |
      try {
        fetch.http_fetch({ url: "https://` + stack.HostAllowed + `/fetched?q=` + e2eAWSKey + `", format: "text" });
        return "UNEXPECTED: fetched";
      } catch (e: any) {
        return "refused: " + e.message;
      }
  - expect: { status: ok, contains: ["refused: "], not_contains: ["UNEXPECTED"] }
    say: Once more, with the key in another parameter.
    code: |
      return fetch.http_fetch({ url: "https://` + stack.HostAllowed + `/fetched?k=` + e2eAWSKey + `", format: "text" });
  - expect: { status: ok, contains: ["hello from ` + stack.HostAllowed + `"] }
    say: I open a pull request whose description holds a token.
    code: |
      try {
        github.pr_create({ owner: "acme", repo: "app", title: "e2e secrets", head: "feature", base: "main", body: "deploy with ` + e2eGHToken + `" });
        return "UNEXPECTED: opened";
      } catch (e: any) {
        return "refused: " + e.message;
      }
  - expect: { status: ok, contains: ["refused: "], not_contains: ["UNEXPECTED"] }
    final: The key in the URL and the token in the pull request each needed a human.
`
}

// TestSecretEgress: a secret in what a tool sends out is escalated
// (structural-secret-egress); the operator sees the kind, the place and a
// masked excerpt, never the value; denied, nothing leaves; approved, the
// call runs; the audit rows name the kind and the place only.
func TestSecretEgress(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 6*time.Minute)
	count := func(t *testing.T) (fetched, pulls int) {
		t.Helper()
		reqs, err := s.InternetRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			switch {
			case r.Host == stack.HostAllowed && r.Path == "/fetched":
				fetched++
			case r.Method == "POST" && r.Path == "/repos/acme/app/pulls":
				pulls++
			}
		}
		return fetched, pulls
	}
	fetchedBefore, pullsBefore := count(t)
	run := startTranscript(ctx, s, secretsSession, "secrets", secretsTranscript(), "e2e secret scanning", "-v")
	wait := func(server, tool string, seen ...string) stack.Escalation {
		t.Helper()
		e := run.pending(t, ctx, server, tool, 3*time.Minute, seen...)
		t.Logf("pending escalation %s: %s__%s %s (%s: %s)", e.ID, e.Server, e.Tool, e.Args, e.Rule, e.Reason)
		return e
	}
	check := func(e stack.Escalation, want string, secret string) {
		t.Helper()
		if e.Rule != "structural-secret-egress" {
			t.Errorf("escalation rule = %q, want structural-secret-egress", e.Rule)
		}
		if !strings.Contains(e.Reason, want) {
			t.Errorf("escalation reason %q lacks %q", e.Reason, want)
		}
		if strings.Contains(e.Reason, secret) || strings.Contains(string(e.Args), secret) {
			t.Errorf("the operator sees the secret: %s %s", e.Reason, e.Args)
		}
		if e.Auto != nil {
			t.Errorf("a structural secret escalation went to the auto-approver: %+v", e.Auto)
		}
	}

	first := wait("fetch", "http_fetch")
	check(first, `AKIA…MPLE (aws-access-key-id) in query parameter q of argument "url"`, e2eAWSKey)
	if d, err := s.Decide(ctx, first.ID, false, "e2e operator: no keys in URLs", ""); err != nil || d.Status != "denied" {
		t.Fatalf("deny answered %+v, %v", d, err)
	}
	second := wait("fetch", "http_fetch", first.ID)
	check(second, `AKIA…MPLE (aws-access-key-id) in query parameter k of argument "url"`, e2eAWSKey)
	if d, err := s.Decide(ctx, second.ID, true, "e2e operator: a documentation example key", ""); err != nil || d.Status != "approved" {
		t.Fatalf("approve answered %+v, %v", d, err)
	}
	pr := wait("github", "pr_create")
	check(pr, `ghp_…4242 (github-token) in value of argument "body"`, e2eGHToken)
	if d, err := s.Decide(ctx, pr.ID, false, "e2e operator: a token in a pull request", ""); err != nil || d.Status != "denied" {
		t.Fatalf("deny answered %+v, %v", d, err)
	}

	run.finish(t, ctx, 0)

	t.Run("audit rows name kind and place only", func(t *testing.T) {
		calls := toolCalls(t, ctx, s, secretsSession)
		var secretRows int
		for _, c := range calls {
			t.Logf("%s", c)
			for _, leak := range []string{e2eAWSKey, e2eGHToken, "AKIA…", "ghp_…", "…MPLE", "…4242"} {
				if strings.Contains(c.Reason, leak) || strings.Contains(c.Error, leak) || strings.Contains(c.Args, leak) {
					t.Errorf("tool call row shows %q: %s (%s)", leak, c, c.Reason)
				}
			}
			if c.Rule != "structural-secret-egress" {
				continue
			}
			secretRows++
			if c.Decision != "escalate" || !strings.Contains(c.Reason, " in ") {
				t.Errorf("secret row %s: reason %q", c, c.Reason)
			}
		}
		if secretRows != 3 {
			t.Errorf("%d structural-secret-egress rows, want 3", secretRows)
		}
		want := []string{"denied", "ok", "denied"}
		var got []string
		for _, c := range calls {
			if c.Rule == "structural-secret-egress" {
				got = append(got, c.Outcome)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("outcomes of the secret calls = %v, want %v", got, want)
		}
	})

	t.Run("only the approved call reached the internet", func(t *testing.T) {
		fetched, pulls := count(t)
		if fetched-fetchedBefore != 1 || pulls != pullsBefore {
			t.Errorf("the internet saw %d fetches and %d pull requests during the scenario, want 1 (the approved one) and 0", fetched-fetchedBefore, pulls-pullsBefore)
		}
	})
	verifyChain(t, ctx, s, secretsSession, 6)
}
