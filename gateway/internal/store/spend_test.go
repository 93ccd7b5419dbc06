package store_test

import (
	"testing"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestLLMSpend(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	insert := func(id, session string, seq, in, out int64, cost float64) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, `INSERT INTO llm_calls
			(id, session_id, seq, at, provider, model, path, stream, status_code, input_tokens, output_tokens, cost_usd, duration_ns, prev_hash, hash)
			VALUES ($1, $2, $3, now(), 'anthropic', 'claude-test', '/v1/messages', false, 200, $4, $5, $6, 1, '\x00', '\x01')`,
			id, session, seq, in, out, cost)
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("a1", "alice", 1, 100, 50, 0.25)
	insert("a2", "alice", 2, 10, 5, 0.5)
	insert("b1", "bob", 1, 7, 3, 1)

	tests := []struct {
		session    string
		wantTokens int64
		wantCost   float64
	}{
		{session: "alice", wantTokens: 165, wantCost: 0.75},
		{session: "bob", wantTokens: 10, wantCost: 1},
		{session: "nobody", wantTokens: 0, wantCost: 0},
	}
	for _, tt := range tests {
		t.Run(tt.session, func(t *testing.T) {
			tokens, cost, err := store.LLMSpend{Pool: db.Pool}.Load(ctx, tt.session)
			if err != nil {
				t.Fatal(err)
			}
			if tokens != tt.wantTokens || cost != tt.wantCost {
				t.Fatalf("Load(%s) = %d tokens, $%v; want %d, $%v", tt.session, tokens, cost, tt.wantTokens, tt.wantCost)
			}
		})
	}
}
