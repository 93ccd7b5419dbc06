package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// policySession is the session of the policy lifecycle scenario.
const policySession = "policy"

func init() { sessions = append(sessions, policySession) }

const policyTranscript = `name: policy-calls
steps:
  - code: |
      const out = [];
      try { filesystem.write_file({ path: "/workspace/policy-e2e.txt", content: "hi\n" }); out.push("write ok"); } catch (e: any) { out.push("write refused"); }
      try { filesystem.read_text_file({ path: "/workspace/policy-e2e.txt" }); out.push("read ok"); } catch (e: any) { out.push("read refused"); }
      try { filesystem.write_file({ path: "/etc/ic-e2e-policy.txt", content: "x\n" }); out.push("UNEXPECTED outside"); } catch (e: any) { out.push("outside refused"); }
      return out.join(", ");
  - expect: { status: ok, contains: ["write ok", "read ok", "outside refused"], not_contains: ["UNEXPECTED"] }
    final: done.
`

// TestPolicyLifecycle: against the real images, every decision record
// carries the version of the policy in force (GET /v1/policy and
// ironcurtain_policy_info agree), SIGHUP to the gateway reloads the policy
// (unchanged: same artifacts), and `ironcurtain policy replay` in the
// gateway image replays the recorded calls from Postgres under the shipped
// policy: nothing becomes looser (exit 0).
func TestPolicyLifecycle(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 6*time.Minute)
	if r, err := s.RunTranscript(ctx, policySession, "policy-calls", []byte(policyTranscript), "make a few calls"); err != nil || r.Code != 0 {
		t.Fatalf("agent run: %v %s", err, r)
	}
	ops, err := s.OpsURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ops+path, nil)
		req.Header.Set("Authorization", "Bearer "+s.Secrets.OperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	var st struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(get("/v1/policy")), &st); err != nil || len(st.Version) != 16 {
		t.Fatalf("GET /v1/policy: %+v %v", st, err)
	}
	n, err := s.SQL(ctx, "SELECT count(*) FROM tool_calls WHERE session_id = "+stack.Quote(policySession)+" AND policy_version = "+stack.Quote(st.Version))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := strconv.Atoi(n); c < 3 {
		t.Fatalf("%s decision records of session %s carry version %s, want the 3 calls", n, policySession, st.Version)
	}
	if !strings.Contains(get("/metrics"), `ironcurtain_policy_info{version="`+st.Version+`"} 1`) {
		t.Fatal("ironcurtain_policy_info does not name the version in force")
	}

	if r, err := s.ExecGateway(ctx, "sh", "-c", "kill -HUP 1"); err != nil || r.Code != 0 {
		t.Fatalf("SIGHUP: %v %s", err, r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(get("/metrics"), `ironcurtain_policy_reloads_total{result="unchanged"} `) ||
		strings.Contains(get("/metrics"), `ironcurtain_policy_reloads_total{result="unchanged"} 0`) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload counted 30 s after SIGHUP\n%s", lastLines(s.GatewayLogs(ctx), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(s.GatewayLogs(ctx), `"source":"signal hangup"`) {
		t.Errorf("the gateway log does not show the reload on SIGHUP")
	}

	r, err := s.ExecGateway(ctx, "ironcurtain", "policy", "replay", "--candidate", "/etc/ironcurtain/policy",
		"--config", "/etc/ironcurtain/e2e/gateway.yaml", "--since", "1h", "--session", policySession, "--format", "json")
	if err != nil || r.Code != 0 {
		t.Fatalf("replay under the policy in force: %v %s", err, r)
	}
	var rep struct {
		CandidateVersion string           `json:"candidate_version"`
		Replayed         int64            `json:"replayed"`
		Counts           map[string]int64 `json:"counts"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("replay output: %v\n%s", err, r)
	}
	t.Logf("policy %s; replayed %d calls of session %s under %s: %v", st.Version, rep.Replayed, policySession, rep.CandidateVersion, rep.Counts)
	// The candidate is the gateway's own policy directory with its own
	// settings: the same version (the e2e gateway has no shadow policy).
	if rep.CandidateVersion != st.Version {
		t.Errorf("replay's candidate version %s, the gateway's %s: versions are not reproducible", rep.CandidateVersion, st.Version)
	}
	if rep.Replayed < 3 || rep.Counts["looser"] != 0 || rep.Counts["tighter"] != 0 || rep.Counts["same"] != rep.Replayed {
		t.Fatalf("replay of the session under its own policy: %s", r.Stdout)
	}
}
