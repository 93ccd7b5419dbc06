package llmprovider

import (
	"sort"
	"strings"
)

// Default prompt-cache multipliers of the input price (Anthropic: a cache
// write costs 1.25× and a cache read 0.1× the base input price).
const (
	DefaultCacheWriteFactor = 1.25
	DefaultCacheReadFactor  = 0.1
)

// Price is a model's price in US dollars per million tokens. Negative
// cache prices mean "derive from the input price".
type Price struct {
	InputPerMTok      float64
	OutputPerMTok     float64
	CacheWritePerMTok float64
	CacheReadPerMTok  float64
}

// NewPrice builds a Price with the default cache multipliers.
func NewPrice(in, out float64) Price {
	return Price{InputPerMTok: in, OutputPerMTok: out, CacheWritePerMTok: -1, CacheReadPerMTok: -1}
}

// DefaultPrices are list prices (USD per million tokens) of well-known
// models, keyed by model name prefix, as published by the providers when
// this table was written. They are estimates for budgets and reports, not
// invoices; override or extend them with relay.prices in gateway.yaml.
var DefaultPrices = map[string]Price{
	// Anthropic
	"claude-opus-4-5":   NewPrice(5, 25),
	"claude-opus-4-1":   NewPrice(15, 75),
	"claude-opus-4":     NewPrice(15, 75),
	"claude-sonnet-4-5": NewPrice(3, 15),
	"claude-sonnet-4":   NewPrice(3, 15),
	"claude-haiku-4-5":  NewPrice(1, 5),
	"claude-3-7-sonnet": NewPrice(3, 15),
	"claude-3-5-sonnet": NewPrice(3, 15),
	"claude-3-5-haiku":  NewPrice(0.8, 4),
	"claude-3-opus":     NewPrice(15, 75),
	"claude-3-haiku":    NewPrice(0.25, 1.25),
	// OpenAI
	"gpt-5":                  NewPrice(1.25, 10),
	"gpt-5-mini":             NewPrice(0.25, 2),
	"gpt-5-nano":             NewPrice(0.05, 0.4),
	"gpt-5-pro":              NewPrice(15, 120),
	"gpt-4.1":                NewPrice(2, 8),
	"gpt-4.1-mini":           NewPrice(0.4, 1.6),
	"gpt-4.1-nano":           NewPrice(0.1, 0.4),
	"gpt-4o":                 NewPrice(2.5, 10),
	"gpt-4o-mini":            NewPrice(0.15, 0.6),
	"gpt-4-turbo":            NewPrice(10, 30),
	"gpt-4":                  NewPrice(30, 60),
	"gpt-3.5-turbo":          NewPrice(0.5, 1.5),
	"o1":                     NewPrice(15, 60),
	"o1-mini":                NewPrice(1.1, 4.4),
	"o1-pro":                 NewPrice(150, 600),
	"o3":                     NewPrice(2, 8),
	"o3-pro":                 NewPrice(20, 80),
	"o3-mini":                NewPrice(1.1, 4.4),
	"o4-mini":                NewPrice(1.1, 4.4),
	"text-embedding-3-small": NewPrice(0.02, 0),
	"text-embedding-3-large": NewPrice(0.13, 0),
}

// PriceTable finds a model's price by its longest matching prefix. A key
// matches a model that equals it or continues it after '-', '@' or ':'
// ("claude-sonnet-4-5" matches "claude-sonnet-4-5-20250929"; "gpt-4o"
// does not match "gpt-4o-mini" when that has its own entry, and "gpt-4"
// never matches "gpt-4o"). Matching ignores case.
type PriceTable struct {
	keys   []string // lower-cased, longest first
	prices map[string]Price
}

// NewPriceTable returns DefaultPrices with overrides added or replacing
// entries (keys match in any case).
func NewPriceTable(overrides map[string]Price) *PriceTable {
	t := &PriceTable{prices: make(map[string]Price, len(DefaultPrices)+len(overrides))}
	for k, p := range DefaultPrices {
		t.prices[strings.ToLower(k)] = p
	}
	for k, p := range overrides {
		t.prices[strings.ToLower(k)] = p
	}
	for k := range t.prices {
		t.keys = append(t.keys, k)
	}
	sort.Slice(t.keys, func(i, j int) bool {
		if len(t.keys[i]) != len(t.keys[j]) {
			return len(t.keys[i]) > len(t.keys[j])
		}
		return t.keys[i] < t.keys[j]
	})
	return t
}

// Lookup returns the matching key and its price; ok is false for a model
// the table does not know.
func (t *PriceTable) Lookup(model string) (key string, p Price, ok bool) {
	m := strings.ToLower(model)
	for _, k := range t.keys {
		if len(m) < len(k) || m[:len(k)] != k {
			continue
		}
		if len(m) == len(k) || m[len(k)] == '-' || m[len(k)] == '@' || m[len(k)] == ':' {
			return k, t.prices[k], true
		}
	}
	return "", Price{}, false
}

// Cost estimates the price in US dollars of a call's tokens: input (not
// cached), cache writes, cache reads and output.
func (p Price) Cost(input, cacheWrite, cacheRead, output int64) float64 {
	cw, cr := p.CacheWritePerMTok, p.CacheReadPerMTok
	if cw < 0 {
		cw = p.InputPerMTok * DefaultCacheWriteFactor
	}
	if cr < 0 {
		cr = p.InputPerMTok * DefaultCacheReadFactor
	}
	return (float64(input)*p.InputPerMTok + float64(cacheWrite)*cw +
		float64(cacheRead)*cr + float64(output)*p.OutputPerMTok) / 1e6
}

// EstimateCost estimates a model call's price in US dollars from the price
// table (DefaultPrices, then prices). ok is false for a model the table
// does not know.
func EstimateCost(prices map[string]Price, model string, inputTokens, outputTokens int64) (cost float64, ok bool) {
	_, p, ok := NewPriceTable(prices).Lookup(model)
	if !ok {
		return 0, false
	}
	return p.Cost(inputTokens, 0, 0, outputTokens), true
}
