package llmrelay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// fakeSpend is a Spend store.
type fakeSpend struct {
	tokens int64
	cost   float64
	fail   atomic.Bool
	loads  atomic.Int32
}

func (f *fakeSpend) Load(context.Context, string) (int64, float64, error) {
	f.loads.Add(1)
	if f.fail.Load() {
		return 0, 0, errors.New("database down")
	}
	return f.tokens, f.cost, nil
}

// TestBudgetExhausted: once a session has spent its budget, its next
// metered call is refused in the provider's shape with a message naming
// the budget and the setting that raises it; other sessions and
// unmetered endpoints are unaffected.
func TestBudgetExhausted(t *testing.T) {
	tests := []struct {
		name      string
		provider  string
		cfg       func(*Config)
		wantType  string
		wantMsg   []string
		otherOK   bool // s2 may still call
		firstCall bool // the first call passes (budget spent by it)
	}{
		{name: "anthropic tokens", provider: llmprovider.Anthropic, cfg: func(c *Config) { c.Budget = Budget{MaxTokens: 30} },
			wantType: "permission_error", wantMsg: []string{"token budget", `"s1"`, "30 of 30", "relay.budget.max_tokens"}, otherOK: true, firstCall: true},
		{name: "openai tokens", provider: llmprovider.OpenAI, cfg: func(c *Config) { c.Budget = Budget{MaxTokens: 100} },
			wantType: "insufficient_quota", wantMsg: []string{"token budget", "150 of 100", "relay.budget.max_tokens"}, otherOK: true, firstCall: true},
		{name: "anthropic cost", provider: llmprovider.Anthropic, cfg: func(c *Config) { c.Budget = Budget{MaxCostUSD: 0.0001} },
			wantType: "permission_error", wantMsg: []string{"cost budget", "relay.budget.max_cost_usd"}, otherOK: true, firstCall: true},
		{name: "session override", provider: llmprovider.OpenAI, cfg: func(c *Config) {
			c.Budget = Budget{MaxTokens: 1 << 30}
			c.SessionBudgets = map[string]Budget{"s1": {MaxCostUSD: 0.00001}}
		}, wantType: "insufficient_quota", wantMsg: []string{"cost budget", "relay.session_budgets.s1.max_cost_usd"}, otherOK: true, firstCall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t, withConfig(tt.cfg))
			call := func(token string) (*http.Response, []byte) {
				if tt.provider == llmprovider.Anthropic {
					return tr.anthropic(t, token, anthropicBody)
				}
				return tr.openai(t, token, openAIBody)
			}
			if resp, body := call(tokenS1); resp.StatusCode != http.StatusOK {
				t.Fatalf("first call: status %d: %s", resp.StatusCode, body)
			}
			tr.sink.waitCalls(t, 1)
			resp, body := call(tokenS1)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403: %s", resp.StatusCode, body)
			}
			if resp.Header.Get("X-Should-Retry") != "false" {
				t.Fatal("a spent budget must not be retried by the SDK")
			}
			typ, msg := errorMessage(t, tt.provider, body)
			if typ != tt.wantType {
				t.Fatalf("type %q, want %q", typ, tt.wantType)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(msg, w) {
					t.Fatalf("message %q lacks %q", msg, w)
				}
			}
			if n := len(tr.model.requests()); n != 1 {
				t.Fatalf("%d requests upstream, want 1", n)
			}
			cs := tr.sink.waitCalls(t, 2)
			if cs[1].StatusCode != 0 || !strings.Contains(cs[1].Error, "refused (budget)") {
				t.Fatalf("refusal record %+v", cs[1])
			}
			if tt.otherOK {
				if resp, body := call(tokenS2); resp.StatusCode != http.StatusOK {
					t.Fatalf("another session was refused: %d %s", resp.StatusCode, body)
				}
			}
			// Unmetered endpoints stay usable.
			if tt.provider == llmprovider.Anthropic {
				resp, body = tr.do(t, http.MethodPost, "/anthropic/v1/messages/count_tokens", anthropicBody, map[string]string{"X-Api-Key": tokenS1})
			} else {
				resp, body = tr.do(t, http.MethodGet, "/openai/models", "", map[string]string{"Authorization": "Bearer " + tokenS1})
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("unmetered endpoint: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestBudgetSurvivesRestart: spend loaded from the store counts, once per
// session; a store error refuses (and is retried on the next call).
func TestBudgetSurvivesRestart(t *testing.T) {
	spend := &fakeSpend{tokens: 1000}
	tr := startRelay(t, func(c *Config, d *Deps) {
		c.Budget = Budget{MaxTokens: 1000}
		d.Spend = spend
	})
	resp, body := tr.anthropic(t, tokenS1, anthropicBody)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if _, msg := errorMessage(t, llmprovider.Anthropic, body); !strings.Contains(msg, "1000 of 1000") {
		t.Fatalf("message %q", msg)
	}
	_, _ = tr.anthropic(t, tokenS1, anthropicBody)
	if n := spend.loads.Load(); n != 1 {
		t.Fatalf("%d loads for one session", n)
	}

	spend2 := &fakeSpend{tokens: 10}
	spend2.fail.Store(true)
	tr2 := startRelay(t, func(c *Config, d *Deps) {
		c.Budget = Budget{MaxTokens: 1000}
		d.Spend = spend2
	})
	resp, body = tr2.anthropic(t, tokenS1, anthropicBody)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d with the store down: %s", resp.StatusCode, body)
	}
	if n := len(tr2.model.requests()); n != 0 {
		t.Fatal("a call went upstream although its budget could not be checked")
	}
	spend2.fail.Store(false)
	if resp, body = tr2.anthropic(t, tokenS1, anthropicBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d after the store recovered: %s", resp.StatusCode, body)
	}
	tr2.sink.waitCalls(t, 2)
	if tokens, _ := tr2.relay.Spent("s1"); tokens != 10+30 {
		t.Fatalf("spent %d, want stored 10 + 30", tokens)
	}
}

// TestConcurrencyCap: a session's calls in flight are capped (429,
// retryable); the slot is freed when a call ends.
func TestConcurrencyCap(t *testing.T) {
	tr := startRelay(t, withConfig(func(c *Config) { c.MaxConcurrentPerSession = 1 }))
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		once.Do(func() {
			close(entered)
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, anthropicJSON)
	}
	done := make(chan int, 1)
	go func() {
		resp, _ := tr.anthropic(t, tokenS1, anthropicBody)
		done <- resp.StatusCode
	}()
	<-entered
	resp, body := tr.anthropic(t, tokenS1, anthropicBody)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if typ, _ := errorMessage(t, llmprovider.Anthropic, body); typ != "rate_limit_error" {
		t.Fatalf("type %q", typ)
	}
	if resp, _ := tr.anthropic(t, tokenS2, anthropicBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("another session was capped: %d", resp.StatusCode)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("first call %d", code)
	}
	if resp, _ := tr.anthropic(t, tokenS1, anthropicBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("the slot was not freed: %d", resp.StatusCode)
	}
}

// TestLedgerConcurrent: concurrent acquire/charge/release keep exact
// counts (run with -race).
func TestLedgerConcurrent(t *testing.T) {
	l := newLedger(Budget{MaxTokens: 1 << 40}, nil, &fakeSpend{tokens: 5}, 1000)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				rel, rf, err := l.acquire(context.Background(), "s", true)
				if err != nil || rf != nil {
					t.Error(err, rf)
					return
				}
				l.charge("s", 1, 0.5)
				rel()
			}
		}()
	}
	wg.Wait()
	tokens, cost := l.spent("s")
	if tokens != 5+5000 || cost != 2500 {
		t.Fatalf("spent %d, %v", tokens, cost)
	}
	if l.accounts["s"].inflight != 0 {
		t.Fatal("slots leaked")
	}
}
