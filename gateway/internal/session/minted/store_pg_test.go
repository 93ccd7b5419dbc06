package minted

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newStore(t testing.TB) (*Store, *pgtest.DB) {
	db := pgtest.New(t, pgtest.Migrated())
	return NewStore(db.Pool), db
}

func mint(t testing.TB, st *Store, spec Spec) (Session, Token) {
	t.Helper()
	s, tok, err := st.Mint(context.Background(), spec, "alice")
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return s, tok
}

// argsTracer records every argument sent to the database.
type argsTracer struct {
	mu   sync.Mutex
	args []string
}

func (a *argsTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.args = append(a.args, d.SQL)
	for _, x := range d.Args {
		a.args = append(a.args, fmt.Sprintf("%v|%s", x, x))
	}
	return ctx
}

func (a *argsTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestTokenNeverStoredNorSent: the database holds only the token's SHA-256
// digest, and the token itself never travels to the database (neither at
// mint nor at authentication); the audit chain head exists from the mint.
func TestTokenNeverStoredNorSent(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	tr := &argsTracer{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := NewStore(pool)
	ctx := context.Background()
	s, tok := mint(t, st, Spec{Name: "run-1", Labels: map[string]string{"team": "infra"}})
	if _, err := st.Authenticate(ctx, string(tok)); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	for _, a := range tr.args {
		if strings.Contains(a, string(tok)) || strings.Contains(a, string(tok)[len(TokenPrefix):]) {
			t.Fatalf("the token was sent to the database: %.80s", a)
		}
	}
	tr.mu.Unlock()

	var rowText string
	var digest []byte
	if err := db.Pool.QueryRow(ctx, `SELECT row_to_json(a)::text, token_digest FROM agent_sessions a WHERE id = $1`, s.ID).Scan(&rowText, &digest); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(tok))
	if string(digest) != string(want[:]) {
		t.Fatal("token_digest is not the token's SHA-256")
	}
	// Nothing else in the whole database holds the token.
	var dump string
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(t::text, ' '), '') FROM (
  SELECT row_to_json(a)::text AS t FROM agent_sessions a UNION ALL SELECT row_to_json(s)::text FROM sessions s) x`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, string(tok)[len(TokenPrefix):]) || strings.Contains(rowText, string(tok)[len(TokenPrefix):]) {
		t.Fatal("the token is stored")
	}
	var chainRows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE id = $1 AND chain_seq = 0`, s.ID).Scan(&chainRows); err != nil || chainRows != 1 {
		t.Fatalf("chain head rows = %d, %v; want 1", chainRows, err)
	}
}

// TestAuthenticate covers the door-independent answers: a fresh token
// authenticates with its budget; a revoked, expired, unknown or
// one-character-off token is refused as an unknown token.
func TestAuthenticate(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	s, tok := mint(t, st, Spec{Name: "run-1", Budget: Budget{MaxTokens: 100, MaxToolCalls: 3}})
	got, err := st.Authenticate(ctx, string(tok))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s.ID || got.Name != "run-1" || got.Budget == nil || got.Budget.MaxTokens != 100 || got.Budget.MaxToolCalls != 3 {
		t.Fatalf("session = %+v (budget %+v)", got, got.Budget)
	}
	_, plain := mint(t, st, Spec{Name: "run-2"})
	if got, err := st.Authenticate(ctx, string(plain)); err != nil || got.Budget != nil {
		t.Fatalf("no-budget session = %+v, %v; want a nil budget (the gateway's defaults)", got, err)
	}

	off := []byte(tok)
	off[len(off)-1] ^= 1
	if _, err := st.Authenticate(ctx, string(off)); !errors.Is(err, session.ErrUnknownToken) {
		t.Errorf("one bit off: %v, want ErrUnknownToken", err)
	}
	if _, err := st.Authenticate(ctx, TokenPrefix+strings.Repeat("A", TokenLen-len(TokenPrefix))); !errors.Is(err, session.ErrUnknownToken) {
		t.Errorf("unknown: %v", err)
	}

	// Expired: the database's clock decides.
	e, etok := mint(t, st, Spec{Name: "run-3"})
	if _, err := db.Pool.Exec(ctx, `UPDATE agent_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Authenticate(ctx, string(etok)); !errors.Is(err, ErrExpired) || !errors.Is(err, session.ErrUnknownToken) {
		t.Errorf("expired: %v, want ErrExpired", err)
	}
	if g, _ := st.Get(ctx, e.ID); g.Status != StatusExpired {
		t.Errorf("expired status = %q", g.Status)
	}

	// Revoked: refused from the commit on.
	r, _, err := st.Revoke(ctx, s.ID, "bob", "run finished")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusRevoked || r.RevokedBy != "bob" || r.RevokeReason != "run finished" || r.RevokedAt == nil {
		t.Fatalf("revoked = %+v", r)
	}
	if _, err := st.Authenticate(ctx, string(tok)); !errors.Is(err, ErrRevoked) {
		t.Errorf("revoked: %v, want ErrRevoked", err)
	}
	// Revoking again keeps the first revocation.
	r2, _, err := st.Revoke(ctx, s.ID, "carol", "again")
	if err != nil || r2.RevokedBy != "bob" || !r2.RevokedAt.Equal(*r.RevokedAt) {
		t.Fatalf("second revoke = %+v, %v", r2, err)
	}
	if _, _, err := st.Revoke(ctx, "sess_aaaaaaaaaaaaaaaaaaaaaaaaaa", "bob", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown revoke: %v", err)
	}
	if _, _, err := st.Revoke(ctx, "agent", "bob", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("static revoke: %v", err)
	}
}

// TestRevocationAcrossReplicas: a session revoked through one pool (one
// gateway replica) is refused at once by another; nothing is cached.
func TestRevocationAcrossReplicas(t *testing.T) {
	a, db := newStore(t)
	b := NewStore(pgtest.Connect(t, db))
	ctx := context.Background()
	s, tok := mint(t, a, Spec{Name: "run"})
	if _, err := b.Authenticate(ctx, string(tok)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Revoke(ctx, s.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(ctx, string(tok)); !errors.Is(err, ErrRevoked) {
		t.Fatalf("other replica after revoke: %v", err)
	}
}

// TestAuthenticateDatabaseDown: a failing database refuses (not an unknown
// token: the caller can tell an outage apart, and still answers 401).
func TestAuthenticateDatabaseDown(t *testing.T) {
	st, db := newStore(t)
	_, tok := mint(t, st, Spec{Name: "run"})
	db.Pool.Close()
	s, err := st.Authenticate(context.Background(), string(tok))
	if err == nil || s.ID != "" {
		t.Fatalf("closed pool: %+v, %v", s, err)
	}
	if errors.Is(err, session.ErrUnknownToken) {
		t.Logf("closed pool reported as unknown token: %v", err)
	}
}

// TestRevokeCancelsPendingEscalation: a call of the session waiting for a
// human is woken and refused when the session is revoked; the escalation
// is recorded as cancelled with who revoked it and why.
func TestRevokeCancelsPendingEscalation(t *testing.T) {
	st, db := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	esc, err := escalation.NewPG(db.Pool, escalation.Config{PollInterval: time.Hour}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer esc.Close()
	s, _ := mint(t, st, Spec{Name: "run"})
	type answer struct {
		res escalation.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := esc.Escalate(ctx, escalation.Request{ID: "e-1", CallID: "c-1", SessionID: s.ID, Kind: escalation.KindToolCall,
			Server: "git", Tool: "push", Args: json.RawMessage(`{}`)})
		done <- answer{res, err}
	}()
	waitPending(t, db.Pool, "e-1")
	_, ids, err := st.Revoke(ctx, s.ID, "bob", "runaway agent")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "e-1" {
		t.Fatalf("cancelled = %v, want [e-1]", ids)
	}
	select {
	case a := <-done:
		if a.err != nil || a.res.Approved || a.res.Status != escalation.StatusCancelled {
			t.Fatalf("waiter got %+v, %v; want a cancelled refusal", a.res, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call was not woken by the revocation (NOTIFY)")
	}
	e, err := esc.Get(ctx, "e-1")
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != escalation.StatusCancelled || e.DecidedBy != "bob" || !strings.Contains(e.DecisionReason, "revoked: runaway agent") || e.DecidedAt == nil {
		t.Fatalf("escalation = %+v", e)
	}
	// An approval that comes too late is refused as already decided.
	if _, err := esc.Decide(ctx, "e-1", escalation.Decision{Approve: true, By: "carol"}); !errors.Is(err, escalation.ErrAlreadyDecided) {
		t.Fatalf("late approve: %v", err)
	}
}

// TestEscalationAfterRevocationIsCancelled: an escalation opened for a
// session revoked an instant before (the call authenticated just before the
// revocation) never waits and can never be approved; the same for an
// expired session and for an approval that lands after the session expired.
func TestEscalationAfterRevocationIsCancelled(t *testing.T) {
	st, db := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	esc, err := escalation.NewPG(db.Pool, escalation.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer esc.Close()
	s, _ := mint(t, st, Spec{Name: "run"})
	if _, _, err := st.Revoke(ctx, s.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	res, err := esc.Escalate(ctx, escalation.Request{ID: "e-2", CallID: "c-2", SessionID: s.ID, Kind: escalation.KindEgress, Resource: "example.com", Args: json.RawMessage(`{}`)})
	if err != nil || res.Approved || res.Status != escalation.StatusCancelled {
		t.Fatalf("escalation of a revoked session: %+v, %v", res, err)
	}

	x, _ := mint(t, st, Spec{Name: "run-x"})
	go func() {
		_, _ = esc.Escalate(ctx, escalation.Request{ID: "e-3", CallID: "c-3", SessionID: x.ID, Kind: escalation.KindToolCall, Server: "git", Tool: "push", Args: json.RawMessage(`{}`)})
	}()
	waitPending(t, db.Pool, "e-3")
	if _, err := db.Pool.Exec(ctx, `UPDATE agent_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = $1`, x.ID); err != nil {
		t.Fatal(err)
	}
	e, err := esc.Decide(ctx, "e-3", escalation.Decision{Approve: true, By: "carol"})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if e.Status != escalation.StatusCancelled || e.DecidedBy != "session-expired" {
		t.Fatalf("approval after expiry = %+v, want cancelled", e)
	}
}

func waitPending(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var status string
		if err := pool.QueryRow(context.Background(), `SELECT status FROM escalations WHERE id = $1`, id).Scan(&status); err == nil && status == "pending" {
			return
		}
	}
	t.Fatalf("escalation %s never pending", id)
}

// TestChargeToolCallConcurrent: the tool-call budget is exact across
// concurrent calls on two replicas.
func TestChargeToolCallConcurrent(t *testing.T) {
	a, db := newStore(t)
	b := NewStore(pgtest.Connect(t, db))
	s, _ := mint(t, a, Spec{Name: "run", Budget: Budget{MaxToolCalls: 25}})
	var ok, spent atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := a
			if i%2 == 1 {
				st = b
			}
			_, _, err := st.ChargeToolCall(context.Background(), s.ID)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, session.ErrBudgetSpent):
				spent.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 25 || spent.Load() != 35 {
		t.Fatalf("charged %d, refused %d; want 25 and 35", ok.Load(), spent.Load())
	}
	used, limit, err := a.ChargeToolCall(context.Background(), s.ID)
	if !errors.Is(err, ErrBudgetSpent) || used != 25 || limit != 25 || !strings.Contains(err.Error(), "25 of 25") {
		t.Fatalf("after: %d/%d %v", used, limit, err)
	}
	free, _ := mint(t, a, Spec{Name: "free"})
	if _, limit, err := a.ChargeToolCall(context.Background(), free.ID); err != nil || limit != 0 {
		t.Fatalf("no budget: limit %d, %v", limit, err)
	}
}

// TestMintValidatesAndAuditVerifies: a hostile spec is refused before the
// database; a minted session with no activity verifies.
func TestMintValidatesAndAuditVerifies(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	for _, spec := range []Spec{
		{Name: "<img src=x onerror=alert(1)>"},
		{Name: "ok", Labels: map[string]string{"k": "\u202Etxt.exe"}},
		{Name: "ok", Budget: Budget{MaxToolCalls: -1}},
	} {
		if _, _, err := st.Mint(ctx, spec, "alice"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Mint(%+v) = %v, want ErrInvalid", spec, err)
		}
	}
	if _, _, err := st.Mint(ctx, Spec{Name: "ok"}, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Mint without an operator: %v", err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM agent_sessions`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows = %d, %v", n, err)
	}
	s, _ := mint(t, st, Spec{Name: "quiet"})
	broken := 0
	if err := audit.VerifyEach(ctx, db.Pool, s.ID, func(c audit.SessionCheck) error {
		if c.Break != nil {
			broken++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if broken != 0 {
		t.Fatal("a minted session without records does not verify")
	}
}

// BenchmarkAuthenticate is the cost a minted token adds to each request on
// every door (one indexed lookup; no cache).
func BenchmarkAuthenticate(b *testing.B) {
	st, _ := newStore(b)
	for range 1000 { // a realistic table
		mint(b, st, Spec{Name: "filler"})
	}
	_, tok := mint(b, st, Spec{Name: "run"})
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := st.Authenticate(ctx, string(tok)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuthenticateParallel: the same under concurrency.
func BenchmarkAuthenticateParallel(b *testing.B) {
	st, _ := newStore(b)
	_, tok := mint(b, st, Spec{Name: "run"})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := st.Authenticate(context.Background(), string(tok)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
