package githttp

import (
	"crypto/sha1"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/policy"
)

// TestPushRefNameAndTipSecrets: what a push names leaves even when it adds
// no object: a secret spelled as a branch name, as a tag name or inside a
// longer name, and a commit or tag message the upstream already has pushed
// under a new name, are each found before the decision and escalated as
// structural-secret-egress; refused, nothing lands. A clean push of an
// existing commit under a new name is not asked about.
func TestPushRefNameAndTipSecrets(t *testing.T) {
	tests := []struct {
		name string
		// prepare runs in the clone and the upstream and returns the
		// refspec to push.
		prepare   func(t *testing.T, e *env, work string) string
		dst       string
		wantWhere string // "" clean
	}{
		{name: "aws key as a branch name with no new object",
			prepare: func(*testing.T, *env, string) string { return "HEAD:refs/heads/" + sampleAWSKey },
			dst:     "refs/heads/" + sampleAWSKey, wantWhere: "aws-access-key-id in ref name of update 1"},
		{name: "github token as a tag name",
			prepare: func(t *testing.T, e *env, work string) string {
				e.mustGit(t, work, "tag", sampleGHToken)
				return "refs/tags/" + sampleGHToken
			},
			dst: "refs/tags/" + sampleGHToken, wantWhere: "github-token in ref name of update 1"},
		{name: "token inside a longer branch name",
			prepare: func(*testing.T, *env, string) string { return "HEAD:refs/heads/fix-" + sampleGHToken + "-bug" },
			dst:     "refs/heads/fix-" + sampleGHToken + "-bug", wantWhere: "github-token in ref name of update 1"},
		{name: "key between underscores in a branch name",
			prepare: func(*testing.T, *env, string) string { return "HEAD:refs/heads/x_" + sampleAWSKey + "_y" },
			dst:     "refs/heads/x_" + sampleAWSKey + "_y", wantWhere: "aws-access-key-id in ref name of update 1"},
		{name: "commit message the upstream already has under a new name",
			prepare: func(t *testing.T, e *env, work string) string {
				seedUpstream(t, e, "legacy", "debug: used "+sampleGHToken, false)
				e.mustGit(t, work, "fetch", "-q", "origin")
				return "refs/remotes/origin/legacy:refs/heads/copy"
			},
			dst: "refs/heads/copy", wantWhere: "github-token in commit "},
		{name: "tag message the upstream already has under a new name",
			prepare: func(t *testing.T, e *env, work string) string {
				seedUpstream(t, e, "v0", "release key "+sampleAWSKey, true)
				e.mustGit(t, work, "fetch", "-q", "origin", "refs/tags/v0:refs/tags/v0")
				return "refs/tags/v0:refs/tags/v0-copy"
			},
			dst: "refs/tags/v0-copy", wantWhere: "aws-access-key-id in tag "},
		{name: "clean existing commit under a new name",
			prepare: func(*testing.T, *env, string) string { return "HEAD:refs/heads/clean" },
			dst:     "refs/heads/clean"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			esc := &fakeEscalator{started: make(chan escalation.Request, 1), answer: make(chan escalation.Result, 1)}
			e := newEnv(t, envOptions{esc: esc})
			work := e.clone(t)
			spec := tc.prepare(t, e, work)
			type result struct {
				out string
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := e.git(work, "push", "origin", spec)
				done <- result{out, err}
			}()
			if tc.wantWhere != "" {
				select {
				case req := <-esc.started:
					if req.Rule != policy.RuleSecretEgress || !strings.Contains(req.Reason, tc.wantWhere) {
						t.Fatalf("escalation %s %q; want %s naming %q", req.Rule, req.Reason, policy.RuleSecretEgress, tc.wantWhere)
					}
					esc.answer <- escalation.Result{Status: "denied", DecidedBy: "ops"}
				case r := <-done:
					t.Fatalf("the push ended without an escalation: %v\n%s", r.err, r.out)
				case <-time.After(60 * time.Second):
					t.Fatal("no escalation")
				}
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the push did not end")
			}
			t.Logf("git push output:\n%s", r.out)
			landed := e.upstreamRef(t, tc.dst) != ""
			if tc.wantWhere == "" {
				if r.err != nil || !landed {
					t.Fatalf("clean push: landed=%v err=%v\n%s", landed, r.err, r.out)
				}
				if d := e.sink.last(t); d.Rule == policy.RuleSecretEgress {
					t.Fatalf("clean push decided by %s: %s", d.Rule, d.Reason)
				}
				return
			}
			if landed || r.err == nil {
				t.Fatalf("refused push landed=%v err=%v\n%s", landed, r.err, r.out)
			}
			if !strings.Contains(r.out, tc.wantWhere) {
				t.Fatalf("the client is not told what was found (%q):\n%s", tc.wantWhere, r.out)
			}
			d := e.sink.last(t)
			if d.Rule != policy.RuleSecretEgress || !strings.Contains(d.Reason, tc.wantWhere) {
				t.Fatalf("recorded %s %q", d.Rule, d.Reason)
			}
			assertNoSecret(t, "record", d.Reason+d.Detail)
		})
	}
}

// seedUpstream adds to the upstream a commit with message msg under
// refs/heads/<name>, or, with tag, an annotated tag <name> with that message
// on main.
func seedUpstream(t *testing.T, e *env, name, msg string, tag bool) {
	t.Helper()
	seed := t.TempDir()
	run(t, seed, "clone", "-q", e.bareD, ".")
	if tag {
		run(t, seed, "tag", "-a", "-m", msg, name)
		run(t, seed, "push", "-q", "origin", "refs/tags/"+name)
		return
	}
	run(t, seed, "commit", "-q", "--allow-empty", "-m", msg)
	run(t, seed, "push", "-q", "origin", "HEAD:refs/heads/"+name)
}

// TestPathSecretsRefusedBeforeAnyUpstreamRequest: an owner or repository
// name carrying a secret is refused, recorded as structural-secret-egress
// without the secret, and never reaches the upstream: not for either
// advertisement (the receive-pack one used to refresh the mirror before any
// decision), not for upload-pack, not for receive-pack.
func TestPathSecretsRefusedBeforeAnyUpstreamRequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, repoPath := range []string{"acme/" + sampleGHToken, sampleAWSKey + "/app", "acme/app-" + sampleGHToken} {
		for _, tc := range []struct{ method, service, query, ctype string }{
			{http.MethodGet, "info/refs", "?service=git-receive-pack", ""},
			{http.MethodGet, "info/refs", "?service=git-upload-pack", ""},
			{http.MethodPost, "git-upload-pack", "", "application/x-git-upload-pack-request"},
			{http.MethodPost, "git-receive-pack", "", "application/x-git-receive-pack-request"},
		} {
			t.Run(repoPath[:8]+" "+tc.service+tc.query, func(t *testing.T) {
				before := len(e.sink.Decisions())
				var body io.Reader
				if tc.method == http.MethodPost {
					body = strings.NewReader(string(commands("report-status side-band-64k", zero+" "+strings.Repeat("1", 40)+" refs/heads/x")))
				}
				req, err := http.NewRequest(tc.method, e.door.URL+"/git/github.com/"+repoPath+".git/"+tc.service+tc.query, body)
				if err != nil {
					t.Fatal(err)
				}
				req.SetBasicAuth("agent", agentToken)
				if tc.ctype != "" {
					req.Header.Set("Content-Type", tc.ctype)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if got := e.up.requests(); len(got) != 0 {
					t.Fatalf("the upstream was asked %v before a decision", got)
				}
				if !strings.Contains(string(b), "holds a secret") {
					t.Fatalf("status %d, answer %q", resp.StatusCode, b)
				}
				assertNoSecret(t, "answer", string(b))
				ds := e.sink.Decisions()
				if len(ds) != before+1 {
					t.Fatalf("%d decisions recorded, want 1", len(ds)-before)
				}
				d := ds[len(ds)-1]
				if d.Decision != "deny" || d.Rule != policy.RuleSecretEgress {
					t.Fatalf("recorded %s %s %q", d.Decision, d.Rule, d.Reason)
				}
				assertNoSecret(t, "record", d.Reason+d.Detail+string(d.Args))
			})
		}
	}
}

// TestPackTrailingDataRefused: bytes after the pack's trailer are refused
// with an unpack error git prints ("remote unpack failed"), whether they
// are junk or a second pack; nothing lands. The same pack without them
// lands.
func TestPackTrailingDataRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	base := strings.TrimSpace(e.mustGit(t, work, "rev-parse", "HEAD"))
	head := e.commit(t, work, "f.txt", "f\n")
	pack := packOf(t, work, head, "^"+base)
	for _, tc := range []struct {
		name, caps string
		trailer    []byte
	}{
		{"junk on the side band", "report-status side-band-64k", []byte("junk")},
		{"one byte with report-status only", "report-status", []byte{0}},
		{"a second pack", "report-status side-band-64k", emptyPack()},
		{"a flush-pkt", "report-status side-band-64k", []byte("0000")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := commands(tc.caps, zero+" "+head+" refs/heads/trailing")
			body = append(append(body, pack...), tc.trailer...)
			status, resp := e.rawPush(t, body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, resp)
			}
			report := resp
			if strings.Contains(tc.caps, "side-band") {
				report, _, _ = decodeReport(t, resp)
			}
			if !strings.Contains(report, "unpack data follows the pack") || !strings.Contains(report, "ng refs/heads/trailing") {
				t.Fatalf("report %q", report)
			}
			if got := e.upstreamRef(t, "refs/heads/trailing"); got != "" {
				t.Fatalf("the push with trailing data landed: %s", got)
			}
			if d := e.sink.last(t); d.Decision != "deny" || d.Rule != policy.RuleInvalidArgument {
				t.Fatalf("recorded %s %s %q", d.Decision, d.Rule, d.Reason)
			}
		})
	}
	status, resp := e.rawPush(t, append(commands("report-status side-band-64k", zero+" "+head+" refs/heads/trailing"), pack...))
	data, _, _ := decodeReport(t, resp)
	if status != http.StatusOK || !strings.Contains(data, "ok refs/heads/trailing") || e.upstreamRef(t, "refs/heads/trailing") != head {
		t.Fatalf("the same pack alone: status %d, report %q", status, data)
	}
}

// emptyPack is a valid pack of no objects.
func emptyPack() []byte {
	p := []byte("PACK")
	p = binary.BigEndian.AppendUint32(p, 2)
	p = binary.BigEndian.AppendUint32(p, 0)
	sum := sha1.Sum(p)
	return append(p, sum[:]...)
}
