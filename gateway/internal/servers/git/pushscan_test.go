package git

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// Sample secrets are assembled at run time so that the repository holds none in one piece.
var (
	sampleAWSKey  = "AKIA" + "IOSFODNN7EXAMPLE"
	sampleGHToken = "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "123456"
)

// secretEngine is newEngine with the server as the push inspector.
func secretEngine(t *testing.T, g *genv, scan policy.SecretScan) *policy.Engine {
	t.Helper()
	var anns []policy.ToolAnnotation
	for _, tool := range g.srv.Tools() {
		anns = append(anns, tool.Annotation)
	}
	scan.PushInspector = g.srv
	rules := &policy.CompiledPolicy{Rules: []policy.CompiledRule{{Name: "allow-everything", Then: policy.Allow, Reason: "test"}}}
	e, err := policy.New(rules, nil, nil, policy.Settings{Sandbox: g.sandbox, Annotations: anns,
		DomainAllowlists: map[string][]string{"git": {"github.com"}}, Secrets: scan,
		UnsafeAllowAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{}))) // the test's git server is on loopback
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPushToolSecretScan: git__push is decided on what it adds, read from
// the mirror before the decision: a key in a file or only in a commit
// message deep in the range escalates as structural-secret-egress (the
// operator's reason has the masked excerpt, the recorded one kind and
// location); what the upstream already has is not reported again; a denied
// detector denies; commits that change after the scan are not pushed.
func TestPushToolSecretScan(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	eng := secretEngine(t, e.genv, policy.SecretScan{})
	commit := func(file, content, msg string) string {
		writeFile(t, filepath.Join(e.repo, file), content)
		rawGit(t, e.repo, "add", file)
		rawGit(t, e.repo, "commit", "-q", "-m", msg)
		return rawGit(t, e.repo, "rev-parse", "HEAD")
	}
	push := func(between func()) (servers.Result, policy.Evaluation) {
		return hubCall(t, eng, e.genv, "push", map[string]any{"path": e.repo, "branch": "feature"}, between)
	}
	rawGit(t, e.repo, "switch", "-q", "-c", "feature")

	// A key in an added file.
	head := commit("config.env", "AWS_ACCESS_KEY_ID="+sampleAWSKey+"\n", "config")
	res, ev := push(nil)
	d := ev.Decision
	if d.Status != policy.Escalate || d.Rule != policy.RuleSecretEgress || !strings.Contains(d.Reason, "aws-access-key-id in file config.env") {
		t.Fatalf("decision %+v", d)
	}
	if op := d.OperatorReason(); !strings.Contains(op, "AKIA…MPLE") || strings.Contains(d.Reason, "AKIA…") || strings.Contains(op, sampleAWSKey) {
		t.Fatalf("operator reason %q / recorded reason %q", op, d.Reason)
	}
	if !strings.Contains(d.Reason, "also:") {
		t.Fatalf("the host's own escalation is not named: %q", d.Reason)
	}
	if objs, _ := ev.Policy[policy.PushedObjectsKey].(map[string]any); objs["refs/heads/feature"] != head {
		t.Fatalf("the policy's arguments do not name the pushed commit: %v", ev.Policy)
	}
	mustOK(t, res) // approved
	if rawGit(t, e.bare, "rev-parse", "refs/heads/feature") != head {
		t.Fatal("the approved push did not land")
	}

	// The next push does not report what the upstream now has.
	commit("b.txt", "b\n", "clean")
	res, ev = push(nil)
	if ev.Decision.Rule == policy.RuleSecretEgress {
		t.Fatalf("an already pushed key is reported again: %+v", ev.Decision)
	}
	mustOK(t, res)

	// A token only in a commit message, two commits before the tip.
	commit("c.txt", "c\n", "debug: token "+sampleGHToken)
	commit("d.txt", "d\n", "d")
	head = commit("e.txt", "e\n", "e")
	res, ev = push(func() {
		// The branch moves while a human looks at the escalation: the
		// commits pushed would not be the ones scanned.
		commit("f.txt", "f\n", "f")
	})
	if ev.Decision.Rule != policy.RuleSecretEgress || !strings.Contains(ev.Decision.Reason, "github-token in commit ") {
		t.Fatalf("decision %+v", ev.Decision)
	}
	mustFail(t, res, "changed after they were scanned")
	if got := rawGit(t, e.bare, "rev-parse", "refs/heads/feature"); got == head || got == rawGit(t, e.repo, "rev-parse", "HEAD") {
		t.Fatal("commits that changed after the scan were pushed")
	}

	// A detector set to deny denies without asking.
	deny := secretEngine(t, e.genv, policy.SecretScan{Deny: []secretscan.Kind{secretscan.KindGitHubToken}})
	_, ev = hubCall(t, deny, e.genv, "push", map[string]any{"path": e.repo, "branch": "feature"}, nil)
	if ev.Decision.Status != policy.Deny || ev.Decision.Rule != policy.RuleSecretEgress {
		t.Fatalf("decision %+v", ev.Decision)
	}
	e.assertTokenNowhere(t)
}

// An inspection that cannot run denies the push.
func TestPushToolSecretScanFailsClosed(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	var anns []policy.ToolAnnotation
	for _, tool := range e.genv.srv.Tools() {
		anns = append(anns, tool.Annotation)
	}
	rules := &policy.CompiledPolicy{Rules: []policy.CompiledRule{{Name: "allow-everything", Then: policy.Allow, Reason: "test"}}}
	broken, err := policy.New(rules, nil, nil, policy.Settings{Sandbox: e.genv.sandbox, Annotations: anns,
		DomainAllowlists: map[string][]string{"git": {"github.com"}}, Secrets: policy.SecretScan{PushInspector: failingInspector{}},
		UnsafeAllowAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	rawGit(t, e.repo, "switch", "-q", "-c", "feature")
	ev := broken.Evaluate(context.Background(), policy.Request{Server: "git", Tool: "push", Args: map[string]any{"path": e.repo, "branch": "feature"}})
	if ev.Decision.Status != policy.Deny || ev.Decision.Rule != policy.RuleSecretEgress {
		t.Fatalf("decision %+v", ev.Decision)
	}
}

type failingInspector struct{}

func (failingInspector) InspectPush(context.Context, *secretscan.Detector, string, policy.PushInput, policy.PushPlan) (policy.PushInspection, error) {
	return policy.PushInspection{}, context.DeadlineExceeded
}

// TestPushToolRefNameAndTipSecrets: git__push is decided on what it names
// too, whatever the upstream has: a secret as the destination branch, as a
// workspace branch pushed under its own name, as a tag pushed with tags, or
// in the message of a commit the upstream already has, pushed under a new
// name, escalates as structural-secret-egress naming the location only.
func TestPushToolRefNameAndTipSecrets(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	eng := secretEngine(t, e.genv, policy.SecretScan{})
	// A commit with a token in its message, which the upstream has and the
	// gateway fetched.
	rawGit(t, e.repo, "switch", "-q", "-c", "legacy")
	rawGit(t, e.repo, "commit", "-q", "--allow-empty", "-m", "debug: used "+sampleGHToken)
	rawGit(t, e.repo, "push", "-q", e.bare, "legacy")
	rawGit(t, e.repo, "switch", "-q", "-")
	if _, ev := hubCall(t, eng, e.genv, "fetch", map[string]any{"path": e.repo}, nil); ev.Decision.Status == policy.Deny {
		t.Fatalf("fetch %+v", ev.Decision)
	}
	rawGit(t, e.repo, "branch", "fix-"+sampleGHToken)
	rawGit(t, e.repo, "tag", "rel-"+sampleAWSKey)
	tests := []struct {
		name      string
		args      map[string]any
		wantWhere string
	}{
		{name: "key as the destination branch", args: map[string]any{"branch": "HEAD", "remote_branch": sampleAWSKey},
			wantWhere: "aws-access-key-id in ref name of update 1"},
		{name: "token in a workspace branch name", args: map[string]any{"branch": "fix-" + sampleGHToken},
			wantWhere: "github-token in ref name of update 1"},
		{name: "key as a tag pushed with tags", args: map[string]any{"branch": "HEAD", "remote_branch": "clean", "tags": true},
			wantWhere: "aws-access-key-id in ref name of update "},
		{name: "a message the upstream has under a new name", args: map[string]any{"branch": "legacy", "remote_branch": "copy"},
			wantWhere: "github-token in commit "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.args["path"] = e.repo
			ev := eng.Evaluate(context.Background(), policy.Request{Server: "git", Tool: "push", Args: tc.args})
			d := ev.Decision
			if d.Status != policy.Escalate || d.Rule != policy.RuleSecretEgress || !strings.Contains(d.Reason, tc.wantWhere) {
				t.Fatalf("decision %s %s %q; want escalate %s naming %q", d.Status, d.Rule, d.Reason, policy.RuleSecretEgress, tc.wantWhere)
			}
			if strings.Contains(d.Reason, sampleAWSKey) || strings.Contains(d.Reason, sampleGHToken) {
				t.Fatalf("the recorded reason holds the secret: %q", d.Reason)
			}
		})
	}
	// A clean name for a commit the upstream has is not asked about.
	ev := eng.Evaluate(context.Background(), policy.Request{Server: "git", Tool: "push", Args: map[string]any{"path": e.repo, "branch": "HEAD", "remote_branch": "clean"}})
	if ev.Decision.Rule == policy.RuleSecretEgress {
		t.Fatalf("clean push decided by %s: %s", ev.Decision.Rule, ev.Decision.Reason)
	}
}

// TestFetchAndPullBranchNameSecrets: a branch name given to git__fetch or
// git__pull reaches the upstream (protocol v2's ref prefixes): a secret in
// it escalates before anything runs; a local branch operation is not asked.
func TestFetchAndPullBranchNameSecrets(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	eng := secretEngine(t, e.genv, policy.SecretScan{})
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"fetch", map[string]any{"branch": "fix-" + sampleGHToken}},
		{"fetch", map[string]any{"remote": "origin", "branch": sampleAWSKey}},
		{"pull", map[string]any{"branch": sampleAWSKey}},
	} {
		tc.args["path"] = e.repo
		d := eng.Evaluate(context.Background(), policy.Request{Server: "git", Tool: tc.tool, Args: tc.args}).Decision
		if d.Rule != policy.RuleSecretEgress || !strings.Contains(d.Reason, `value of argument "branch"`) {
			t.Fatalf("%s %v: decision %s %s %q", tc.tool, tc.args, d.Status, d.Rule, d.Reason)
		}
	}
	d := eng.Evaluate(context.Background(), policy.Request{Server: "git", Tool: "branch", Args: map[string]any{"path": e.repo, "name": sampleAWSKey}}).Decision
	if d.Status != policy.Allow || d.Rule == policy.RuleSecretEgress {
		t.Fatalf("a local branch operation was scanned as egress: %+v", d)
	}
}
