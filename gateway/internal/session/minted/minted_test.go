package minted

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/session"
)

var now = time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", MaxLabelValue+1)
	manyLabels := map[string]string{}
	for i := range MaxLabels + 1 {
		manyLabels[fmt.Sprintf("k%d", i)] = "v"
	}
	tests := []struct {
		name      string
		spec      Spec
		wantField string // "" = valid
	}{
		{name: "minimal", spec: Spec{Name: "run-1"}},
		{name: "full", spec: Spec{Name: "ci.build_42", TTL: time.Hour, Budget: Budget{MaxTokens: 1, MaxCostUSD: 0.5, MaxToolCalls: 10}, Labels: map[string]string{"team": "infra", "ci/job": "é ok"}}},
		{name: "expires_at", spec: Spec{Name: "r", ExpiresAt: now.Add(2 * time.Hour)}},
		{name: "max ttl", spec: Spec{Name: "r", TTL: MaxTTL}},
		{name: "empty name", spec: Spec{}, wantField: "name: required"},
		{name: "long name", spec: Spec{Name: strings.Repeat("a", 65)}, wantField: "name: at most 64"},
		{name: "name with space", spec: Spec{Name: "a b"}, wantField: "name:"},
		{name: "name with slash", spec: Spec{Name: "../x"}, wantField: "name:"},
		{name: "name starts with dash", spec: Spec{Name: "-x"}, wantField: "name:"},
		{name: "name html", spec: Spec{Name: "<script>"}, wantField: "name:"},
		{name: "name unicode", spec: Spec{Name: "rün"}, wantField: "name:"},
		{name: "name newline", spec: Spec{Name: "a\nb"}, wantField: "name:"},
		{name: "both expiries", spec: Spec{Name: "r", TTL: time.Hour, ExpiresAt: now.Add(time.Hour)}, wantField: "expires_at: give ttl or expires_at"},
		{name: "ttl too short", spec: Spec{Name: "r", TTL: time.Second}, wantField: "ttl: must be between"},
		{name: "ttl negative", spec: Spec{Name: "r", TTL: -time.Hour}, wantField: "ttl:"},
		{name: "ttl too long", spec: Spec{Name: "r", TTL: MaxTTL + time.Second}, wantField: "ttl:"},
		{name: "expires in the past", spec: Spec{Name: "r", ExpiresAt: now.Add(-time.Hour)}, wantField: "expires_at: must be at least"},
		{name: "expires too late", spec: Spec{Name: "r", ExpiresAt: now.Add(MaxTTL + time.Hour)}, wantField: "expires_at: must be at most"},
		{name: "negative tokens", spec: Spec{Name: "r", Budget: Budget{MaxTokens: -1}}, wantField: "budget.max_tokens"},
		{name: "negative cost", spec: Spec{Name: "r", Budget: Budget{MaxCostUSD: -0.01}}, wantField: "budget.max_cost_usd: must not be negative"},
		{name: "NaN cost", spec: Spec{Name: "r", Budget: Budget{MaxCostUSD: math.NaN()}}, wantField: "budget.max_cost_usd: must be a finite"},
		{name: "Inf cost", spec: Spec{Name: "r", Budget: Budget{MaxCostUSD: math.Inf(1)}}, wantField: "budget.max_cost_usd: must be a finite"},
		{name: "huge cost", spec: Spec{Name: "r", Budget: Budget{MaxCostUSD: 1e9}}, wantField: "budget.max_cost_usd: at most"},
		{name: "negative calls", spec: Spec{Name: "r", Budget: Budget{MaxToolCalls: -5}}, wantField: "budget.max_tool_calls"},
		{name: "too many labels", spec: Spec{Name: "r", Labels: manyLabels}, wantField: "labels: at most 16"},
		{name: "label key upper", spec: Spec{Name: "r", Labels: map[string]string{"Team": "x"}}, wantField: `labels["Team"]`},
		{name: "label key empty", spec: Spec{Name: "r", Labels: map[string]string{"": "x"}}, wantField: `labels[""]`},
		{name: "label key html", spec: Spec{Name: "r", Labels: map[string]string{"<b>": "x"}}, wantField: `labels["<b>"]`},
		{name: "label value long", spec: Spec{Name: "r", Labels: map[string]string{"k": long}}, wantField: `labels["k"]: a value is at most 256`},
		{name: "label value control", spec: Spec{Name: "r", Labels: map[string]string{"k": "a\x1b[31mred"}}, wantField: `labels["k"]: character U+001B`},
		{name: "label value RTL override", spec: Spec{Name: "r", Labels: map[string]string{"k": "abc\u202Egpj.exe"}}, wantField: `labels["k"]: character U+202E`},
		{name: "label value zero width", spec: Spec{Name: "r", Labels: map[string]string{"k": "a\u200Bb"}}, wantField: `character U+200B`},
		{name: "label value invalid utf8", spec: Spec{Name: "r", Labels: map[string]string{"k": "\xff"}}, wantField: `not valid UTF-8`},
		{name: "label value newline", spec: Spec{Name: "r", Labels: map[string]string{"k": "a\nb"}}, wantField: `character U+000A`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate(now)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantField) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantField)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
		})
	}
}

// TestValidateNamesEveryField: several bad fields are all reported.
func TestValidateNamesEveryField(t *testing.T) {
	err := Spec{Name: "", TTL: time.Second, Budget: Budget{MaxTokens: -1, MaxToolCalls: -1}}.Validate(now)
	for _, f := range []string{"name:", "ttl:", "budget.max_tokens:", "budget.max_tool_calls:"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
}

func TestValidateReason(t *testing.T) {
	for _, ok := range []string{"", "the run is over", "fini: ça marche"} {
		if err := ValidateReason(ok); err != nil {
			t.Errorf("ValidateReason(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{strings.Repeat("x", MaxReasonBytes+1), "a\x00b", "a\u202Eb", "\xfe"} {
		if err := ValidateReason(bad); err == nil || !strings.Contains(err.Error(), "reason:") {
			t.Errorf("ValidateReason(%q) = %v, want a reason: error", bad, err)
		}
	}
}

func TestExpiry(t *testing.T) {
	if got := (Spec{}).Expiry(now); !got.Equal(now.Add(DefaultTTL)) {
		t.Errorf("default expiry = %v", got)
	}
	if got := (Spec{TTL: time.Hour}).Expiry(now); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("ttl expiry = %v", got)
	}
	at := now.Add(3 * time.Hour)
	if got := (Spec{ExpiresAt: at}).Expiry(now); !got.Equal(at) {
		t.Errorf("expires_at expiry = %v", got)
	}
}

// TestCredentials: ids and tokens have their form, come from crypto/rand
// (no two alike) and a token never prints.
func TestCredentials(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, tok, err := newCredentials()
		if err != nil {
			t.Fatal(err)
		}
		if !ValidID(id) {
			t.Fatalf("id %q has not the minted form", id)
		}
		if !plausible(string(tok)) || len(tok) != TokenLen {
			t.Fatalf("token of length %d has not the minted form", len(tok))
		}
		if seen[id] || seen[string(tok)] {
			t.Fatal("a credential repeated")
		}
		seen[id], seen[string(tok)] = true, true
		for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok)} {
			if strings.Contains(s, string(tok)) {
				t.Fatalf("the token is revealed by formatting: %s", s)
			}
		}
	}
	for _, bad := range []string{"", "sess_", "sess_ABCDEFGHIJKLMNOPQRSTUVWXYZ", "sess_abcdefghijklmnopqrstuvwxy1", "sess_abcdefghijklmnopqrstuvwxyz\n", "agent"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

// TestImplausibleTokenNoQuery: a token that is not of the minted form is
// refused without touching the database (the store has no pool: a query
// would panic).
func TestImplausibleTokenNoQuery(t *testing.T) {
	st := &Store{}
	for _, tok := range []string{"", "short", strings.Repeat("x", TokenLen), TokenPrefix + "x", TokenPrefix + strings.Repeat("A", TokenLen)} {
		if _, err := st.Authenticate(context.Background(), tok); !errors.Is(err, session.ErrUnknownToken) {
			t.Errorf("Authenticate(%q) = %v, want ErrUnknownToken", tok, err)
		}
	}
}

func TestErrorsAreUnknownToken(t *testing.T) {
	for _, err := range []error{ErrRevoked, ErrExpired} {
		if !errors.Is(err, session.ErrUnknownToken) {
			t.Errorf("%v is not session.ErrUnknownToken", err)
		}
	}
}

func FuzzValidate(f *testing.F) {
	f.Add("run-1", int64(3600), int64(0), 0.0, int64(0), "team", "infra")
	f.Add("<script>", int64(-1), int64(-1), math.NaN(), int64(-1), "Bad Key", "a\u202Eb")
	f.Add("", int64(0), int64(1<<62), 1e300, int64(1<<62), "", "\xff")
	f.Fuzz(func(t *testing.T, name string, ttlSec, tokens int64, cost float64, calls int64, key, value string) {
		spec := Spec{Name: name, TTL: time.Duration(ttlSec) * time.Second, Budget: Budget{MaxTokens: tokens, MaxCostUSD: cost, MaxToolCalls: calls},
			Labels: map[string]string{key: value}}
		err := spec.Validate(now)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		// Whatever passes fits the database's CHECKs and the console's needs.
		if !nameRE.MatchString(name) || len(name) > MaxNameLen {
			t.Fatalf("name %q passed", name)
		}
		if tokens < 0 || calls < 0 || cost < 0 || math.IsNaN(cost) || math.IsInf(cost, 0) || cost > MaxCostUSD {
			t.Fatalf("budget %+v passed", spec.Budget)
		}
		if exp := spec.Expiry(now); exp.Before(now.Add(MinTTL-expiryTolerance)) || exp.After(now.Add(MaxTTL+expiryTolerance)) {
			t.Fatalf("expiry %v passed", exp)
		}
		if !labelKeyRE.MatchString(key) || len(value) > MaxLabelValue || printable(value) != "" {
			t.Fatalf("label %q=%q passed", key, value)
		}
		for _, r := range value {
			if r < 0x20 || r == 0x7f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200b || r == 0xfeff {
				t.Fatalf("label value %q with %U passed", value, r)
			}
		}
	})
}

// TestLookupIsByDigest is the timing argument for minted tokens: the
// database compares digests, never tokens, so an attacker's guess that
// shares a long prefix with a real token shares no more of the compared
// bytes than any random guess (the B-tree comparison's time cannot leak the
// token byte by byte); the row found is then compared again in constant
// time (Authenticate, subtle.ConstantTimeCompare).
func TestLookupIsByDigest(t *testing.T) {
	_, tok, err := newCredentials()
	if err != nil {
		t.Fatal(err)
	}
	want := Digest(string(tok))
	longest := 0
	for i := range 2000 {
		guess := []byte(tok)
		guess[len(guess)-1-i%8] ^= byte(1 + i/8%63) // one character off, near the end
		d := Digest(string(guess))
		n := 0
		for n < len(d) && d[n] == want[n] {
			n++
		}
		longest = max(longest, n)
	}
	// 2000 random digests share at most a few leading bytes by chance.
	if longest > 3 {
		t.Fatalf("a near-miss token's digest shares %d leading bytes with the real one", longest)
	}
}
