package llmprovider

import (
	"math"
	"testing"
)

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// usage is a call's token counts, the arguments of Price.Cost.
type usage struct{ Input, CacheWrite, CacheRead, Output int64 }

func TestPriceLookup(t *testing.T) {
	tab := NewPriceTable(map[string]Price{"llama3.1": NewPrice(0, 0), "GPT-4O": NewPrice(1, 1)})
	tests := []struct {
		model   string
		wantKey string
	}{
		{model: "claude-sonnet-4-5-20250929", wantKey: "claude-sonnet-4-5"},
		{model: "claude-sonnet-4-20250514", wantKey: "claude-sonnet-4"},
		{model: "claude-opus-4-1-20250805", wantKey: "claude-opus-4-1"},
		{model: "claude-opus-4-5", wantKey: "claude-opus-4-5"},
		{model: "claude-3-5-haiku-latest", wantKey: "claude-3-5-haiku"},
		{model: "claude-sonnet-4-5@20250929", wantKey: "claude-sonnet-4-5"},
		{model: "gpt-4o-mini-2024-07-18", wantKey: "gpt-4o-mini"},
		{model: "gpt-4o-2024-08-06", wantKey: "gpt-4o"},
		{model: "GPT-4o", wantKey: "gpt-4o"},
		{model: "gpt-4", wantKey: "gpt-4"},
		{model: "gpt-4-0613", wantKey: "gpt-4"},
		{model: "gpt-4.1-mini", wantKey: "gpt-4.1-mini"},
		{model: "o3-pro-2025-06-10", wantKey: "o3-pro"},
		{model: "llama3.1:8b", wantKey: "llama3.1"},
		{model: "gpt-4oo", wantKey: ""},
		{model: "claude-sonnet-45", wantKey: ""},
		{model: "my-claude-sonnet-4", wantKey: ""},
		{model: "", wantKey: ""},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			key, _, ok := tab.Lookup(tt.model)
			if key != tt.wantKey || ok != (tt.wantKey != "") {
				t.Fatalf("key %q ok %v", key, ok)
			}
		})
	}
	if _, p, _ := tab.Lookup("gpt-4o"); p.InputPerMTok != 1 {
		t.Fatal("an override (in another case) did not replace the default")
	}
}

func TestPriceCost(t *testing.T) {
	tests := []struct {
		name string
		p    Price
		u    usage
		want float64
	}{
		{name: "plain", p: NewPrice(3, 15), u: usage{Input: 1e6, Output: 1e6}, want: 18},
		{name: "default cache factors", p: NewPrice(4, 0), u: usage{CacheWrite: 1e6, CacheRead: 1e6}, want: 5 + 0.4},
		{name: "explicit cache prices", p: Price{InputPerMTok: 4, CacheWritePerMTok: 1, CacheReadPerMTok: 0}, u: usage{CacheWrite: 1e6, CacheRead: 1e6}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Cost(tt.u.Input, tt.u.CacheWrite, tt.u.CacheRead, tt.u.Output); !approx(got, tt.want) {
				t.Fatalf("cost %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEstimateCost(t *testing.T) {
	if c, ok := EstimateCost(nil, "claude-haiku-4-5-20251001", 1_000_000, 1_000_000); !ok || c != 6 {
		t.Fatalf("haiku: %v %v, want 6 (1 + 5)", c, ok)
	}
	if _, ok := EstimateCost(nil, "my-local-model", 1, 1); ok {
		t.Fatal("an unknown model has a price")
	}
	if c, ok := EstimateCost(map[string]Price{"my-local-model": NewPrice(0, 0)}, "my-local-model", 10, 10); !ok || c != 0 {
		t.Fatalf("override: %v %v", c, ok)
	}
}
