package console

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

const operatorToken = "operator-token-0123456789abcdef"

var t0 = time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)

type fakeEsc struct {
	mu      sync.Mutex
	list    []escalation.Escalation
	decided []escalation.Decision
}

func (f *fakeEsc) ListEach(_ context.Context, lf escalation.ListFilter, fn func(*escalation.Escalation) error) error {
	f.mu.Lock()
	list := append([]escalation.Escalation(nil), f.list...)
	f.mu.Unlock()
	for i := range list {
		e := list[i]
		if lf.Status != "" && e.Status != lf.Status {
			continue
		}
		if err := fn(&e); err != nil {
			if errors.Is(err, audit.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (f *fakeEsc) Get(_ context.Context, id string) (escalation.Escalation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.list {
		if e.ID == id {
			return e, nil
		}
	}
	return escalation.Escalation{}, escalation.ErrNotFound
}

func (f *fakeEsc) Decide(_ context.Context, id string, d escalation.Decision) (escalation.Escalation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, e := range f.list {
		if e.ID == id {
			if e.Status != escalation.StatusPending {
				return e, escalation.ErrAlreadyDecided
			}
			f.decided = append(f.decided, d)
			f.list[i].Status = escalation.StatusDenied
			if d.Approve {
				f.list[i].Status = escalation.StatusApproved
			}
			f.list[i].DecidedBy = d.By
			return f.list[i], nil
		}
	}
	return escalation.Escalation{}, escalation.ErrNotFound
}

type fakeStore struct {
	calls  []audit.ToolCall
	egress []EgressEvent
	llm    []LLMCall
	other  []EgressEvent
	dis    []Disagreement
	sums   []opsapi.SessionSummary
	check  audit.SessionCheck
}

func (s *fakeStore) ToolCalls(_ context.Context, f audit.Filter, fn func(*audit.ToolCall) error) error {
	for i := range s.calls {
		c := s.calls[i]
		if f.Session != "" && c.SessionID != f.Session {
			continue
		}
		if !f.Cursor.IsZero() && !c.Time.Before(f.Cursor.Time) {
			continue
		}
		if err := fn(&c); err != nil {
			if errors.Is(err, audit.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (s *fakeStore) EgressOf(_ context.Context, ids []string, _ int) ([]EgressEvent, error) {
	var out []EgressEvent
	for _, e := range s.egress {
		for _, id := range ids {
			if e.ToolCallID == id {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func (s *fakeStore) Around(context.Context, string, time.Time, time.Time, int) ([]LLMCall, []EgressEvent, error) {
	return s.llm, s.other, nil
}

func (s *fakeStore) Disagreements(context.Context, int) ([]Disagreement, error) { return s.dis, nil }

func (s *fakeStore) Verify(context.Context, string) (audit.SessionCheck, error) { return s.check, nil }

func (s *fakeStore) Summaries(context.Context, int) ([]opsapi.SessionSummary, error) {
	return s.sums, nil
}

type fakeAdmin struct {
	rows    []SessionRow
	minted  []MintRequest
	revoked []string
}

func (a *fakeAdmin) List(context.Context, int) ([]SessionRow, error) { return a.rows, nil }

func (a *fakeAdmin) Mint(_ context.Context, m MintRequest, _ string) (SessionRow, string, error) {
	if m.Name == "" {
		return SessionRow{}, "", UserError{errors.New("name: required")}
	}
	a.minted = append(a.minted, m)
	row := SessionRow{SessionSummary: opsapi.SessionSummary{SessionID: "sess-new"}, Name: m.Name, Status: "active", Minted: true}
	return row, "icsess_secret_token_shown_once", nil
}

func (a *fakeAdmin) Revoke(_ context.Context, id, _, _ string) error {
	a.revoked = append(a.revoked, id)
	return nil
}

// hostile strings an agent could write into any field.
var hostile = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(2)>`,
	`javascript:alert(3)`,
	"evil\u202Etxt.exe",
	"a\u2066b\u2069c\u200Bd\uFEFF",
	`</textarea><svg onload=alert(4)>`,
	`{{.CSRF}}`,
}

type world struct {
	esc   *fakeEsc
	store *fakeStore
	admin *fakeAdmin
	c     *Console
}

func newWorld(t testing.TB, payload string) *world {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"path": payload, "url": "javascript:alert(5)", "note": payload})
	esc := &fakeEsc{list: []escalation.Escalation{
		{ID: "esc-1", CallID: "call-1", SessionID: "s1", Kind: escalation.KindToolCall, Server: "fs" + payload, Tool: "write" + payload,
			Args: args, Rule: "rule" + payload, Reason: "reason " + payload, Resource: "/w/" + payload, Status: escalation.StatusPending,
			Auto:      &escalation.AutoReview{Verdict: "human", Outcome: "left", Model: "m" + payload, Reasoning: payload},
			CreatedAt: t0.Add(-time.Minute), ExpiresAt: t0.Add(4 * time.Minute)},
		{ID: "esc-0", CallID: "call-0", SessionID: "s1" + payload, Kind: escalation.KindEgress, Server: "egress", Tool: "connect",
			Args: args, Reason: payload, Resource: "example.com", Status: escalation.StatusDenied, DecidedBy: "alice" + payload,
			DecisionReason: payload, CreatedAt: t0.Add(-time.Hour), ExpiresAt: t0},
	}}
	store := &fakeStore{
		calls: []audit.ToolCall{{CallID: "call-1", SessionID: "s1", Time: t0.Add(-time.Minute), Server: "fetch", Tool: "get" + payload,
			Args: args, Decision: "allow", Rule: "r" + payload, Reason: payload, ShadowDecision: "deny", PolicyVersion: "v" + payload,
			Outcome: &audit.Outcome{Status: "error", Duration: time.Second, Error: payload}}},
		egress: []EgressEvent{{ID: "eg-1", ToolCallID: "call-1", At: t0.Add(-time.Minute), Kind: "fetch", Method: "GET", Host: "h" + payload, Port: 443,
			Decision: "deny", Reason: payload, Error: payload}},
		llm:   []LLMCall{{ID: "l1", At: t0, Provider: "anthropic", Model: "m" + payload, Path: "/v1/" + payload, InputTokens: 10, OutputTokens: 5, CostUSD: .01, Error: payload}},
		other: []EgressEvent{{ID: "eg-2", At: t0, Kind: "git", Method: "POST", Host: payload, Port: 443, Decision: "allow", Reason: payload}},
		dis:   []Disagreement{{CallID: "call-1", SessionID: "s1" + payload, Server: "fs", Tool: payload, At: t0, Decision: "allow", Rule: payload, ShadowDecision: "deny", ShadowRule: payload}},
		check: audit.SessionCheck{SessionID: "s1", Records: 3, Break: &audit.Break{SessionID: "s1", Table: "tool_calls", RowID: payload, Problem: payload}},
	}
	admin := &fakeAdmin{rows: []SessionRow{{SessionSummary: opsapi.SessionSummary{SessionID: "s1" + payload, ToolCalls: 3, LastSeen: t0},
		Name: payload, Status: "active", Minted: true, Labels: map[string]string{payload: payload}, Budget: "3/10 tool calls"},
		{SessionSummary: opsapi.SessionSummary{SessionID: "s2", LastSeen: t0}, Status: "revoked", Minted: true, Revoked: "revoked by alice: " + payload}}}
	ops, err := opsapi.NewOperators(map[string]opsapi.OperatorToken{"alice": operatorToken})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Deps{
		Operators: ops, Escalations: esc, Store: store, Sessions: admin,
		Policy: func() PolicyStatus {
			return PolicyStatus{Version: "v1", LoadedAt: t0, Dir: "/policy" + payload, Rules: 3, Warnings: []string{payload}, Shadow: "v0"}
		},
		Watch:  func() (<-chan struct{}, func()) { return make(chan struct{}), func() {} },
		Now:    func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &world{esc: esc, store: store, admin: admin, c: c}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
