package replay

import (
	"context"
	"path/filepath"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

type sliceSource []Record

func (s sliceSource) Each(_ context.Context, _ Filter, fn func(*Record) error) error {
	for i := range s {
		if err := fn(&s[i]); err != nil {
			return err
		}
	}
	return nil
}

// TestReplaySessionWorkspace: a minted session's recorded call named its
// own workspace's canonical path; replay judges it in that workspace (as
// the gateway did), not against the sandbox, where it would be a protected
// path and show up as a tightening that never happened.
func TestReplaySessionWorkspace(t *testing.T) {
	s := testSettings()
	s.SessionSandboxRoot = "/var/lib/ironcurtain/workspaces"
	dir := filepath.Join("testdata", "candidate-same")
	eng, err := policy.LoadDirRecorded(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	const id = "sess_abcdefghijklmnopqrstuvwxyz"
	own := s.SessionSandboxRoot + "/" + id + "/a.txt"
	recs := sliceSource{
		{CallID: "w1", SessionID: id, Server: "filesystem", Tool: "read_file", Args: []byte(`{"path":"` + own + `"}`),
			Decision: "allow", Rule: policy.RuleSandboxAllow},
		{CallID: "w2", SessionID: "static", Server: "filesystem", Tool: "read_file", Args: []byte(`{"path":"` + own + `"}`),
			Decision: "deny", Rule: policy.RuleProtectedPath},
		{CallID: "w3", SessionID: id, Server: "filesystem", Tool: "read_file", Args: []byte(`{"path":"` + s.SessionSandboxRoot + `/sess_bbbbbbbbbbbbbbbbbbbbbbbbbb/a.txt"}`),
			Decision: "deny", Rule: policy.RuleProtectedPath},
	}
	rep, err := New(eng, dir).Run(context.Background(), recs, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 3 || rep.Counts[Unchanged] != 3 {
		t.Fatalf("replayed %d, counts %v, not replayable %v, transitions %+v", rep.Replayed, rep.Counts, rep.NotReplayable, rep.Transitions)
	}
}
