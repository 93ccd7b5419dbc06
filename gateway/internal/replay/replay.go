// Package replay re-evaluates recorded tool calls under a candidate policy
// (`ironcurtain policy replay`) and reports what would change: counts per
// (old rule → new rule, old decision → new decision) with a few example
// calls, the calls that become looser first.
//
// Calls are replayed on the arguments the gateway recorded, which are the
// canonical ones the policy judged (paths resolved, named remotes replaced
// by their URLs), with the settings the gateway ran under, on an engine that
// sees no file system (policy.LoadDirRecorded): no file, repository or
// network state of today is needed, and none is consulted. What the
// recorded arguments cannot reproduce is counted apart and never guessed:
// values cut or secrets masked before storage, decisions that read a
// repository (pushes, default remotes), refusals for a hard link, and
// decisions the gateway took outside the policy (loop breaker, budgets,
// tool pins, a door's own refusals). Decisions on path arguments are marked:
// a symlink or a file created since could decide them differently today.
//
// Records stream from Postgres one row at a time (PG), so memory stays flat
// whatever the number of calls: the report holds counts and a bounded number
// of examples.
package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"ironcurtain.dev/gateway/internal/session/minted"
	"ironcurtain.dev/gateway/policy"
)

// Bounds of a report.
const (
	// MaxExamples is the number of example calls kept per transition.
	MaxExamples = 3
	// MaxTransitions bounds the distinct (rule, decision) transitions; past
	// it, further ones are counted in one "(other)" row.
	MaxTransitions = 10000
	// MaxVersions bounds the distinct recorded policy versions counted.
	MaxVersions = 1000
	// maxExampleArgs bounds the arguments text of an example.
	maxExampleArgs = 300
)

// Change classifies a transition.
type Change string

// Changes, from the most to the least important.
const (
	Looser    Change = "looser"  // deny → escalate or allow, escalate → allow
	Tighter   Change = "tighter" // the other way
	RuleOnly  Change = "rule"    // same decision, another rule decided
	Unchanged Change = "same"
)

func rank(decision string) int {
	switch decision {
	case "allow":
		return 0
	case "escalate":
		return 1
	case "deny":
		return 2
	}
	return -1
}

func classify(oldDec, oldRule, newDec, newRule string) Change {
	switch o, n := rank(oldDec), rank(newDec); {
	case n < o:
		return Looser
	case n > o:
		return Tighter
	case oldRule != newRule:
		return RuleOnly
	}
	return Unchanged
}

// Filter selects the records to replay.
type Filter struct {
	Since, Until time.Time // zero: unbounded
	Session      string
	Server       string
}

// Source streams records. fn is called once per record; the *Record is
// reused between calls.
type Source interface {
	Each(ctx context.Context, f Filter, fn func(*Record) error) error
}

// Example is one call of a transition.
type Example struct {
	CallID        string    `json:"call_id"`
	SessionID     string    `json:"session_id"`
	At            time.Time `json:"at"`
	Tool          string    `json:"tool"`
	Args          string    `json:"args"`
	PolicyVersion string    `json:"policy_version,omitempty"`
	NewReason     string    `json:"new_reason"`
}

// Transition counts the calls that went from one (decision, rule) to
// another.
type Transition struct {
	Change      Change `json:"change"`
	OldDecision string `json:"old_decision"`
	NewDecision string `json:"new_decision"`
	OldRule     string `json:"old_rule"`
	NewRule     string `json:"new_rule"`
	Calls       int64  `json:"calls"`
	// PathState counts the calls whose decision read path arguments, taken
	// as recorded: a symlink or a file created or removed since could
	// decide them differently today.
	PathState int64     `json:"path_state"`
	Examples  []Example `json:"examples,omitempty"`
}

// Report is the outcome of a replay.
type Report struct {
	Candidate        string           `json:"candidate"`
	CandidateVersion string           `json:"candidate_version"`
	Since            time.Time        `json:"since,omitzero"`
	Until            time.Time        `json:"until,omitzero"`
	Session          string           `json:"session,omitempty"`
	Server           string           `json:"server,omitempty"`
	Records          int64            `json:"records"`
	Replayed         int64            `json:"replayed"`
	Counts           map[Change]int64 `json:"counts"`
	NotReplayable    map[string]int64 `json:"not_replayable"`
	// Versions counts the replayed records per recorded policy version
	// ("" : recorded before versions were).
	Versions    map[string]int64 `json:"recorded_versions"`
	Transitions []*Transition    `json:"transitions"`
	Elapsed     time.Duration    `json:"elapsed_ns"`
}

// Looser reports whether any replayed call would be decided more loosely.
func (r *Report) Looser() bool { return r.Counts[Looser] > 0 }

type transitionKey struct{ oldDec, newDec, oldRule, newRule string }

// Replayer evaluates records under one candidate policy.
type Replayer struct {
	eng  *policy.Engine
	name string
	now  func() time.Time
}

// New returns a replayer for the candidate engine (load it with
// policy.LoadDirRecorded and the settings the gateway ran under). name
// describes it in the report (its directory).
func New(candidate *policy.Engine, name string) *Replayer {
	return &Replayer{eng: candidate, name: name, now: time.Now}
}

// Run replays every record src yields for f.
func (rp *Replayer) Run(ctx context.Context, src Source, f Filter) (*Report, error) {
	begin := rp.now()
	rep := &Report{
		Candidate: rp.name, CandidateVersion: rp.eng.Version(),
		Since: f.Since, Until: f.Until, Session: f.Session, Server: f.Server,
		Counts: map[Change]int64{}, NotReplayable: map[string]int64{}, Versions: map[string]int64{},
	}
	idx := map[transitionKey]*Transition{}
	err := src.Each(ctx, f, func(r *Record) error {
		rep.Records++
		if rep.Records%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rp.one(rep, idx, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replaying recorded calls: %w", err)
	}
	rep.Transitions = make([]*Transition, 0, len(idx))
	for _, t := range idx {
		rep.Transitions = append(rep.Transitions, t)
	}
	sortTransitions(rep.Transitions)
	rep.Elapsed = rp.now().Sub(begin)
	return rep, nil
}

// gatewayRules are decided by the gateway outside the policy engine, on
// state a replay does not have (the session's recent calls, its budget, a
// tool's live definition, a door's checks of the request).
var gatewayRules = map[string]bool{
	policy.RuleInternalError:       true,
	"loop-breaker":                 true, // mcphub: the session's recent calls
	"session.budget":               true, // mcphub: the session's spending
	"structural-tool-changed":      true, // the external tool's live definition
	"structural-git-http-host":     true, // the git door's served hosts
	"structural-github-forbidden":  true, // the GitHub relay's own refusals
	"structural-github-merge":      true,
	"structural-github-request":    true,
	"structural-github-no-token":   true,
	"structural-github-not-own-pr": true, // ownership read from GitHub
}

func (rp *Replayer) one(rep *Report, idx map[transitionKey]*Transition, r *Record) {
	if rank(r.Decision) < 0 {
		rep.NotReplayable[SkipBadRecord]++
		return
	}
	switch {
	case gatewayRules[r.Rule] || strings.HasPrefix(r.Rule, "structural-github-"):
		rep.NotReplayable[SkipGateway]++
		return
	case r.Rule == policy.RuleHardLinkWrite:
		rep.NotReplayable[SkipHardLink]++
		return
	}
	args, why := decodeArgs(r)
	if why != "" {
		rep.NotReplayable[why]++
		return
	}
	if door, _ := args["door"].(string); doors[door] {
		rep.NotReplayable[SkipDoor]++
		return
	}
	req := policy.Request{Server: r.Server, Tool: r.Tool, Args: args}
	if root := rp.eng.SessionSandboxRoot(); root != "" && minted.ValidID(r.SessionID) {
		req.Sandbox = root + "/" + r.SessionID // judged in its own workspace, as it was
	}
	ev := rp.eng.Evaluate(context.Background(), req)
	d := ev.Decision
	if req.Sandbox != "" && d.Rule == policy.RuleSessionSandbox {
		rep.NotReplayable[SkipWorkspace]++
		return
	}
	if readsRepository(r, d) {
		rep.NotReplayable[SkipGitState]++
		return
	}
	rep.Replayed++
	if len(rep.Versions) < MaxVersions || rep.Versions[r.PolicyVersion] > 0 {
		rep.Versions[r.PolicyVersion]++
	} else {
		rep.Versions["(other)"]++
	}
	newDec := d.Status.String()
	key := transitionKey{r.Decision, newDec, r.Rule, d.Rule}
	t := idx[key]
	if t == nil {
		if len(idx) >= MaxTransitions {
			key = transitionKey{r.Decision, newDec, "(other)", "(other)"}
			t = idx[key]
		}
		if t == nil {
			t = &Transition{Change: classify(key.oldDec, key.oldRule, key.newDec, key.newRule),
				OldDecision: key.oldDec, NewDecision: key.newDec, OldRule: key.oldRule, NewRule: key.newRule}
			idx[key] = t
		}
	}
	t.Calls++
	rep.Counts[t.Change]++
	if rp.readsPaths(r.Server, r.Tool, args) {
		t.PathState++
	}
	if t.Change != Unchanged && len(t.Examples) < MaxExamples {
		t.Examples = append(t.Examples, Example{
			CallID: r.CallID, SessionID: r.SessionID, At: r.At, Tool: r.Server + "__" + r.Tool,
			Args: cut(string(r.Args), maxExampleArgs), PolicyVersion: r.PolicyVersion, NewReason: cut(d.Reason, maxExampleArgs),
		})
	}
}

// readsRepository reports a call whose decision needs a repository: a push
// (its refs and remotes are read by git), a fetch or pull of the default
// remote, or any call the candidate decided by resolving a remote (which
// fails without the repository).
func readsRepository(r *Record, d policy.Decision) bool {
	if policy.IsPushTool(r.Server, r.Tool) {
		return true
	}
	return d.Rule == policy.RuleGitPush || d.Rule == policy.RuleGitRemote
}

var pathRoles = func() map[policy.Role]bool {
	m := map[policy.Role]bool{}
	for _, r := range policy.RolesByCategory(policy.CategoryPath) {
		m[r] = true
	}
	return m
}()

// readsPaths reports whether a path-role argument has a value in args.
func (rp *Replayer) readsPaths(server, tool string, args map[string]any) bool {
	ann, ok := rp.eng.Annotation(server, tool)
	if !ok {
		return false
	}
	for _, a := range ann.Args {
		if _, set := args[a.Name]; !set {
			continue
		}
		roles := append([]policy.Role(nil), a.Spec.Default...)
		for _, w := range a.Spec.When {
			roles = append(roles, w.Roles...)
		}
		for _, r := range roles {
			if pathRoles[r] {
				return true
			}
		}
	}
	return false
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

var changeOrder = map[Change]int{Looser: 0, Tighter: 1, RuleOnly: 2, Unchanged: 3}

// sortTransitions puts looser first, then tighter, rule changes and
// unchanged; within each, the most calls first.
func sortTransitions(ts []*Transition) {
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if changeOrder[a.Change] != changeOrder[b.Change] {
			return changeOrder[a.Change] < changeOrder[b.Change]
		}
		if a.Calls != b.Calls {
			return a.Calls > b.Calls
		}
		return fmt.Sprint(a.OldRule, a.NewRule, a.OldDecision, a.NewDecision) < fmt.Sprint(b.OldRule, b.NewRule, b.OldDecision, b.NewDecision)
	})
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w interface{ Write([]byte) (int, error) }) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
