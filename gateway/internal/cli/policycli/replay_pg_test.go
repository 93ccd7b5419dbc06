package policycli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/replay"
	"ironcurtain.dev/gateway/internal/store/pgtest"
	"ironcurtain.dev/gateway/policy"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// replayConfig writes a gateway.yaml like a default deployment's: the
// shipped policy, the sandbox /workspace (which need not exist here).
func replayConfig(t *testing.T) (cfgPath, baseDir string) {
	t.Helper()
	base, err := filepath.Abs(filepath.Join("..", "..", "..", "policies", "base"))
	if err != nil {
		t.Fatal(err)
	}
	cfgPath = filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := "policy_dir: " + base + "\nsandbox: /workspace\nannotations_file: " + filepath.Join(base, policy.AnnotationsFile) +
		"\nservers:\n  fetch:\n    allowed_domains: [\"*\"]\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, base
}

// TestReplayOnPostgres records calls through the real audit sink (so the
// arguments are stored as the gateway stores them: redacted, cut, keys
// escaped) and replays them with the CLI.
func TestReplayOnPostgres(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sink, err := audit.NewPG(db.Pool, audit.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	calls := []struct {
		id, session, server, tool, args, decision, rule string
		at                                              time.Time
	}{
		{"c1", "s1", "filesystem", "read_file", `{"path":"/workspace/a.txt"}`, "allow", "structural-sandbox-allow", now.Add(-time.Hour)},
		{"c2", "s1", "filesystem", "read_file", `{"path":"/etc/passwd"}`, "deny", "deny-read-outside-sandbox", now.Add(-time.Hour)},
		{"c3", "s1", "github", "pr_comment", `{"owner":"acme","repo":"app","number":7,"body":"LGTM"}`, "escalate", "escalate-github-publish", now.Add(-50 * time.Minute)},
		{"c4", "s2", "github", "pr_view", `{"owner":"acme","repo":"app","number":7}`, "allow", "allow-github-reads", now.Add(-40 * time.Minute)},
		{"c5", "s2", "filesystem", "write_file", `{"path":"/workspace/big.txt","content":"` + strings.Repeat("x", 10000) + `"}`, "allow", "structural-sandbox-allow", now.Add(-30 * time.Minute)},
		{"c6", "s2", "fetch", "http_fetch", `{"url":"https://api.example.com/?access_token=ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}`, "allow", "allow-fetch-allowlisted", now.Add(-20 * time.Minute)},
		{"c7", "s2", "filesystem", "read_file", `{"$ref":"x","path":"/workspace/a.txt"}`, "deny", "structural-unknown-argument", now.Add(-10 * time.Minute)},
		{"c8", "s3", "github", "pr_comment", `{"owner":"acme","repo":"app","number":8,"body":"old"}`, "escalate", "escalate-github-publish", now.Add(-48 * time.Hour)},
	}
	for _, c := range calls {
		if err := sink.Record(ctx, &audit.ToolCallDecision{CallID: c.id, SessionID: c.session, Time: c.at, Server: c.server, Tool: c.tool,
			Args: json.RawMessage(c.args), Decision: c.decision, Rule: c.rule, Reason: "recorded", PolicyVersion: "0123456789abcdef"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	cfg, _ := replayConfig(t)
	changed := filepath.Join("..", "..", "replay", "testdata", "candidate-changed")
	same := filepath.Join("..", "..", "replay", "testdata", "candidate-same")

	tests := []struct {
		name      string
		args      []string
		wantCode  int
		records   int64
		counts    map[replay.Change]int64
		skipped   map[string]int64
		wantFirst string // the first transition's new rule
	}{
		{
			name: "changed candidate, last 24 hours", args: []string{"--candidate", changed}, wantCode: 1, records: 7,
			counts:  map[replay.Change]int64{replay.Looser: 1, replay.Tighter: 1, replay.RuleOnly: 1, replay.Unchanged: 2},
			skipped: map[string]int64{replay.SkipTruncated: 1, replay.SkipRedacted: 1}, wantFirst: "allow-github-pr-comment",
		},
		{
			name: "the old call too", args: []string{"--candidate", changed, "--since", "72h"}, wantCode: 1, records: 8,
			counts:  map[replay.Change]int64{replay.Looser: 2, replay.Tighter: 1, replay.RuleOnly: 1, replay.Unchanged: 2},
			skipped: map[string]int64{replay.SkipTruncated: 1, replay.SkipRedacted: 1}, wantFirst: "allow-github-pr-comment",
		},
		{
			name: "one session", args: []string{"--candidate", changed, "--session", "s2"}, wantCode: 0, records: 4,
			counts:  map[replay.Change]int64{replay.Tighter: 1, replay.Unchanged: 1},
			skipped: map[string]int64{replay.SkipTruncated: 1, replay.SkipRedacted: 1}, wantFirst: "deny-github-pr-view",
		},
		{
			name: "one server until 45 minutes ago", args: []string{"--candidate", changed, "--server", "github", "--until", "45m"}, wantCode: 1, records: 1,
			counts: map[replay.Change]int64{replay.Looser: 1}, wantFirst: "allow-github-pr-comment",
		},
		{
			name: "same policy", args: []string{"--candidate", same}, wantCode: 0, records: 7,
			counts:  map[replay.Change]int64{replay.Unchanged: 5},
			skipped: map[string]int64{replay.SkipTruncated: 1, replay.SkipRedacted: 1}, wantFirst: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"replay", "--config", cfg, "--database-url", db.DSN, "--format", "json"}, tt.args...)
			code, out, stderr := run(t, "", t.TempDir(), args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.wantCode, out, stderr)
			}
			var rep replay.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("output is not a JSON report: %v\n%s", err, out)
			}
			if rep.Records != tt.records {
				t.Errorf("records %d, want %d", rep.Records, tt.records)
			}
			for _, c := range []replay.Change{replay.Looser, replay.Tighter, replay.RuleOnly, replay.Unchanged} {
				if rep.Counts[c] != tt.counts[c] {
					t.Errorf("%s %d, want %d", c, rep.Counts[c], tt.counts[c])
				}
			}
			for k, v := range tt.skipped {
				if rep.NotReplayable[k] != v {
					t.Errorf("not replayable %s: %d, want %d", k, rep.NotReplayable[k], v)
				}
			}
			if tt.wantFirst != "" && (len(rep.Transitions) == 0 || rep.Transitions[0].NewRule != tt.wantFirst) {
				t.Errorf("first transition %+v, want new rule %s", rep.Transitions, tt.wantFirst)
			}
			if rep.Versions["0123456789abcdef"] != rep.Replayed {
				t.Errorf("recorded versions %v, want all %d under 0123456789abcdef", rep.Versions, rep.Replayed)
			}
		})
	}

	t.Run("table", func(t *testing.T) {
		code, out, _ := run(t, "", t.TempDir(), "replay", "--config", cfg, "--database-url", db.DSN, "--candidate", changed)
		if code != 1 || !strings.Contains(out, "looser   escalate → allow") || !strings.Contains(out, "c3 github__pr_comment") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"--config", cfg, "--database-url", db.DSN}, 2, "--candidate DIR is required"},
			{[]string{"--config", cfg, "--database-url", db.DSN, "--candidate", changed, "--format", "xml"}, 2, "--format"},
			{[]string{"--config", cfg, "--database-url", db.DSN, "--candidate", changed, "--since", "1h", "--until", "2h"}, 2, "--until must be after --since"},
			{[]string{"--config", cfg, "--database-url", db.DSN, "--candidate", t.TempDir()}, 3, "compiled-policy.json"},
			{[]string{"--config", cfg, "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", "--candidate", changed}, 3, "opening database"},
		} {
			code, _, stderr := run(t, "", t.TempDir(), append([]string{"replay"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
			}
		}
	})
}
