package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/policy"
)

// fileSource replays records kept as JSON lines (testdata/records.jsonl:
// tool_calls rows as the gateway stored them).
type fileSource struct{ path string }

type recordJSON struct {
	CallID        string    `json:"call_id"`
	SessionID     string    `json:"session_id"`
	At            time.Time `json:"at"`
	Server        string    `json:"server"`
	Tool          string    `json:"tool"`
	Args          string    `json:"args"`
	ArgsEscaped   bool      `json:"args_escaped"`
	Decision      string    `json:"decision"`
	Rule          string    `json:"rule"`
	PolicyVersion string    `json:"policy_version"`
}

func (s fileSource) Each(_ context.Context, f Filter, fn func(*Record) error) error {
	fh, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var j recordJSON
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			return err
		}
		if (f.Session != "" && j.SessionID != f.Session) || (f.Server != "" && j.Server != f.Server) ||
			(!f.Since.IsZero() && j.At.Before(f.Since)) || (!f.Until.IsZero() && !j.At.Before(f.Until)) {
			continue
		}
		r := Record{CallID: j.CallID, SessionID: j.SessionID, At: j.At, Server: j.Server, Tool: j.Tool, Args: []byte(j.Args),
			ArgsEscaped: j.ArgsEscaped, Decision: j.Decision, Rule: j.Rule, PolicyVersion: j.PolicyVersion}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// testSettings are a default deployment's: the sandbox /workspace (which
// need not exist: the recorded engine sees no file system), the shipped
// annotations, the gateway's configuration directory protected.
func testSettings() policy.Settings {
	return policy.Settings{
		Sandbox:          "/workspace",
		ProtectedPaths:   []string{"/etc/ironcurtain"},
		AnnotationsFile:  filepath.Join("..", "..", "policies", "base", policy.AnnotationsFile),
		ConfinedServers:  policy.BuiltinConfinedServers(),
		DomainAllowlists: map[string][]string{"fetch": {"*"}},
	}
}

func replayFixture(t testing.TB, candidate string, f Filter) *Report {
	t.Helper()
	dir := filepath.Join("testdata", candidate)
	eng, err := policy.LoadDirRecorded(dir, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := New(eng, dir).Run(context.Background(), fileSource{"testdata/records.jsonl"}, f)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestReplayFixtures(t *testing.T) {
	notReplayable := map[string]int64{SkipTruncated: 1, SkipRedacted: 1, SkipGitState: 1, SkipGateway: 1, SkipHardLink: 1, SkipInvalidArgs: 1, SkipBadRecord: 1, SkipDoor: 1}
	type row struct {
		change                           Change
		oldDec, newDec, oldRule, newRule string
		calls, pathState                 int64
		examples                         []string
	}
	tests := []struct {
		name      string
		candidate string
		filter    Filter
		replayed  int64
		counts    map[Change]int64
		skipped   map[string]int64
		rows      []row // the changed rows, in report order
		looser    bool
	}{
		{
			name: "the policy that recorded them decides alike", candidate: "candidate-same",
			replayed: 8, counts: map[Change]int64{Unchanged: 8}, skipped: notReplayable,
		},
		{
			name: "changed policy", candidate: "candidate-changed",
			replayed: 8, counts: map[Change]int64{Looser: 1, Tighter: 1, RuleOnly: 2, Unchanged: 4}, skipped: notReplayable,
			rows: []row{
				{Looser, "escalate", "allow", "escalate-github-publish", "allow-github-pr-comment", 1, 0, []string{"r03"}},
				{Tighter, "allow", "deny", "allow-github-reads", "deny-github-pr-view", 1, 0, []string{"r04"}},
				// Escalating reads outside the sandbox changes nothing: the
				// filesystem server cannot reach them, so the invariant denies.
				{RuleOnly, "deny", "deny", "deny-read-outside-sandbox", "structural-unreachable-path", 2, 2, []string{"r02", "r13"}},
			},
			looser: true,
		},
		{
			name: "one session", candidate: "candidate-changed", filter: Filter{Session: "s2"},
			replayed: 1, counts: map[Change]int64{Tighter: 1},
			skipped: map[string]int64{SkipTruncated: 1, SkipRedacted: 1, SkipGitState: 1},
			rows:    []row{{Tighter, "allow", "deny", "allow-github-reads", "deny-github-pr-view", 1, 0, []string{"r04"}}},
		},
		{
			name: "one server and a time window", candidate: "candidate-changed",
			filter:   Filter{Server: "filesystem", Since: time.Date(2026, 11, 20, 10, 0, 2, 0, time.UTC), Until: time.Date(2026, 11, 20, 10, 0, 13, 0, time.UTC)},
			replayed: 3, counts: map[Change]int64{RuleOnly: 1, Unchanged: 2},
			skipped: map[string]int64{SkipTruncated: 1, SkipGateway: 1, SkipHardLink: 1, SkipInvalidArgs: 1},
			rows:    []row{{RuleOnly, "deny", "deny", "deny-read-outside-sandbox", "structural-unreachable-path", 1, 1, []string{"r02"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := replayFixture(t, tt.candidate, tt.filter)
			if rep.Replayed != tt.replayed {
				t.Errorf("replayed %d, want %d", rep.Replayed, tt.replayed)
			}
			for _, c := range []Change{Looser, Tighter, RuleOnly, Unchanged} {
				if rep.Counts[c] != tt.counts[c] {
					t.Errorf("%s: %d, want %d", c, rep.Counts[c], tt.counts[c])
				}
			}
			for k, v := range tt.skipped {
				if rep.NotReplayable[k] != v {
					t.Errorf("not replayable %s: %d, want %d", k, rep.NotReplayable[k], v)
				}
			}
			var total int64
			for _, v := range rep.NotReplayable {
				total += v
			}
			if total+rep.Replayed != rep.Records {
				t.Errorf("%d records, %d replayed and %d not: some were lost", rep.Records, rep.Replayed, total)
			}
			if rep.Looser() != tt.looser {
				t.Errorf("Looser() = %v", rep.Looser())
			}
			var changed []*Transition
			for _, tr := range rep.Transitions {
				if tr.Change != Unchanged {
					changed = append(changed, tr)
				} else if len(changed) != len(tt.rows) {
					t.Errorf("an unchanged row comes before a changed one")
				}
			}
			if len(changed) != len(tt.rows) {
				t.Fatalf("%d changed rows, want %d: %+v", len(changed), len(tt.rows), changed)
			}
			for i, want := range tt.rows {
				got := changed[i]
				if got.Change != want.change || got.OldDecision != want.oldDec || got.NewDecision != want.newDec || got.OldRule != want.oldRule ||
					got.NewRule != want.newRule || got.Calls != want.calls || got.PathState != want.pathState {
					t.Errorf("row %d = %+v\nwant %+v", i, *got, want)
				}
				var ids []string
				for _, e := range got.Examples {
					ids = append(ids, e.CallID)
				}
				if strings.Join(ids, ",") != strings.Join(want.examples, ",") {
					t.Errorf("row %d examples %v, want %v", i, ids, want.examples)
				}
			}
		})
	}
}

func TestReportOutput(t *testing.T) {
	rep := replayFixture(t, "candidate-changed", Filter{})
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{
		"Replayed 8 of 16 recorded calls under testdata/candidate-changed",
		"looser 1, tighter 1, other rule 2, unchanged 4",
		"truncated     1", "git_state     1", "hard_link     1",
		"looser   escalate → allow",
		"2 on paths as recorded",
		"r02 filesystem__read_file",
		"1 call would be decided more loosely",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "looser ") > strings.Index(out, "tighter ") || strings.Index(out, "\ntighter") > strings.Index(out, "\nrule") {
		t.Errorf("looser rows must come first:\n%s", out)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Counts[Looser] != 1 || back.Transitions[0].Change != Looser || back.NotReplayable[SkipRedacted] != 1 || back.CandidateVersion != rep.CandidateVersion {
		t.Errorf("JSON round trip: %s", js.String())
	}
}

// TestOneLine: agent-written text in examples cannot drive the terminal.
func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           "plain",
		"a\nb":            `a\x0ab`,
		"\x1b[2Jclear":    `\x1b[2Jclear`,
		"rtl\u202eevil":   `rtl\u202eevil`,
		"zero\u200bwidth": `zero\u200bwidth`,
		"c1\u009bcontrol": `c1\x9bcontrol`,
		"ünïcode stays":   "ünïcode stays",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		escaped bool
		want    string // JSON of the result, or the skip reason
	}{
		{name: "plain", args: `{"path":"/w/a"}`, escaped: true, want: `{"path":"/w/a"}`},
		{name: "empty", args: ``, escaped: true, want: `{}`},
		{name: "escaped key", args: `{"$$ref":"x"}`, escaped: true, want: `{"$ref":"x"}`},
		{name: "twice escaped key", args: `{"$$$ref":"x"}`, escaped: true, want: `{"$$ref":"x"}`},
		{name: "nested escaped", args: `{"a":[{"$$b":{"$$c":1}}]}`, escaped: true, want: `{"a":[{"$b":{"$c":1}}]}`},
		{name: "truncated value", args: `{"c":{"$truncated":{"bytes":1}}}`, escaped: true, want: SkipTruncated},
		{name: "whole truncated", args: `{"$truncated":{"bytes":1}}`, escaped: true, want: SkipTruncated},
		{name: "invalid json marker", args: `{"$invalid_json":{"bytes":1}}`, escaped: true, want: SkipInvalidArgs},
		{name: "redacted value", args: `{"h":{"Authorization":"[REDACTED]"}}`, escaped: true, want: SkipRedacted},
		{name: "redacted in key", args: `{"x[REDACTED]":1}`, escaped: true, want: SkipRedacted},
		{name: "not an object", args: `[1]`, escaped: true, want: SkipInvalidArgs},
		{name: "not json", args: `{`, escaped: true, want: SkipInvalidArgs},
		{name: "old row: a $ key is the agent's", args: `{"$truncated":"agent"}`, escaped: false, want: `{"$truncated":"agent"}`},
		{name: "old row: $$ stays", args: `{"$$x":1}`, escaped: false, want: `{"$$x":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, why := decodeArgs(&Record{Args: []byte(tt.args), ArgsEscaped: tt.escaped})
			got := why
			if why == "" {
				b, _ := json.Marshal(m)
				got = string(b)
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"path":"/w"}`, `{"$$a":{"$truncated":1}}`, `[REDACTED]`, `{"a":["$$b"]}`} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, escaped bool) {
		m, why := decodeArgs(&Record{Args: b, ArgsEscaped: escaped})
		if why == "" && m == nil {
			t.Fatal("no arguments and no reason")
		}
		if why == "" && escaped {
			if s := scan(m, false); s == SkipRedacted {
				t.Fatalf("redacted arguments replayed: %s", b)
			}
		}
	})
}
