package lists

import (
	"context"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/gateway/policy"
)

func TestCheckValue(t *testing.T) {
	tests := []struct {
		typ, v  string
		wantErr string
	}{
		{typ: policy.MatchDomains, v: "nytimes.com"},
		{typ: policy.MatchDomains, v: "*.nytimes.com"},
		{typ: policy.MatchDomains, v: "news.bbc.co.uk"},
		{typ: policy.MatchDomains, v: "*.bbc.co.uk"},
		{typ: policy.MatchDomains, v: "NYTimes.com"},
		{typ: policy.MatchDomains, v: "*", wantErr: "not a domain"},
		{typ: policy.MatchDomains, v: "com", wantErr: "not a domain"},
		{typ: policy.MatchDomains, v: "co.uk", wantErr: "public suffix"},
		{typ: policy.MatchDomains, v: "*.co.uk", wantErr: "public suffix"},
		{typ: policy.MatchDomains, v: "*.github.io", wantErr: "public suffix"},
		{typ: policy.MatchDomains, v: "127.0.0.1", wantErr: "IP address"},
		{typ: policy.MatchDomains, v: "127.1", wantErr: "numeric"},
		{typ: policy.MatchDomains, v: "0.08", wantErr: "numeric"},
		{typ: policy.MatchDomains, v: "[::1]", wantErr: "IP address"},
		{typ: policy.MatchDomains, v: "https://cnn.com", wantErr: "not a domain"},
		{typ: policy.MatchDomains, v: "cnn.com/world", wantErr: "not a domain"},
		{typ: policy.MatchDomains, v: "cnn.com:443", wantErr: "not a domain"},
		{typ: policy.MatchDomains, v: "evil\u2024com", wantErr: "not a domain"},
		{typ: policy.MatchDomains, v: "@news", wantErr: "list reference"},
		{typ: policy.MatchDomains, v: "a b.com", wantErr: "spaces"},
		{typ: policy.MatchEmails, v: "ada@example.com"},
		{typ: policy.MatchEmails, v: "ada@@example.com", wantErr: "not an email"},
		{typ: policy.MatchEmails, v: "ada@localhost", wantErr: "not an email"},
		{typ: policy.MatchIdentifiers, v: "AAPL"},
		{typ: policy.MatchIdentifiers, v: strings.Repeat("x", 201), wantErr: "longer than 200"},
		{typ: policy.MatchIdentifiers, v: "", wantErr: "empty"},
		{typ: "colors", v: "red", wantErr: "unknown list type"},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.v, func(t *testing.T) {
			err := CheckValue(tt.typ, tt.v)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzCheckValue: an accepted domain entry never opens a public suffix, an
// IP or everything, whatever the model returns.
func FuzzCheckValue(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com", "*", "*.com", "co.uk", "1.2.3.4", "xn--80ak6aa92e.com", "a..b", "*.*.x.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if CheckValue(policy.MatchDomains, v) != nil {
			return
		}
		host := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(v)), "*.")
		if host == "" || !strings.Contains(host, ".") || strings.ContainsAny(host, "*/:@ ") {
			t.Fatalf("accepted %q", v)
		}
		if err := policy.ValidateDomainPattern(strings.ToLower(strings.TrimSpace(v))); err != nil {
			t.Fatalf("accepted %q, which the engine refuses: %v", v, err)
		}
	})
}

func TestResolve(t *testing.T) {
	news := policy.ListDefinition{Name: "news", Type: policy.MatchDomains, GenerationPrompt: "List news sites."}
	contacts := policy.ListDefinition{Name: "contacts", Type: policy.MatchEmails, GenerationPrompt: "My contacts.", RequiresMcp: true, McpServerHint: "google-workspace"}
	existing := &policy.DynamicLists{Lists: map[string]policy.ResolvedList{
		"news":     {Values: []string{"old.com"}, ManualAdditions: []string{"lwn.net"}, ManualRemovals: []string{"bad.com"}, InputHash: "stale"},
		"contacts": {Values: []string{"ada@example.com"}, ManualAdditions: []string{"bob@example.com"}},
	}}
	srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		return fakemodel.Answer{Text: `{"values": ["CNN.com", "bad.com", "cnn.com", "*.bbc.co.uk"]}`}
	})
	defer srv.Close()
	r := testenv.Runner(t, srv, testenv.RunnerOptions{})
	out, notes, err := Resolve(context.Background(), r, []policy.ListDefinition{news, contacts}, existing, Options{Now: testenv.Now})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Calls() != 1 {
		t.Errorf("calls = %d: only the news list asks the model", srv.Calls())
	}
	n := out.Lists["news"]
	if got := strings.Join(n.Values, ","); got != "cnn.com,bad.com,*.bbc.co.uk,*.cnn.com,*.bad.com" {
		t.Errorf("values = %s", got)
	}
	if got := strings.Join(n.Effective(), ","); got != "cnn.com,*.bbc.co.uk,*.cnn.com,*.bad.com,lwn.net" {
		t.Errorf("effective = %s", got)
	}
	if n.InputHash != InputHash(news) || n.ResolvedAt != "2026-05-01T12:00:00.000Z" {
		t.Errorf("metadata = %+v", n)
	}
	c := out.Lists["contacts"]
	if strings.Join(c.Effective(), ",") != "ada@example.com,bob@example.com" {
		t.Errorf("contacts = %+v", c)
	}
	if notes[0].List != "contacts" || notes[0].Status != "manual-only" || !strings.Contains(notes[0].Detail, "manualAdditions") {
		t.Errorf("notes = %+v", notes)
	}

	// Unchanged inputs: no model call; Only limits a refresh to one list.
	calls := srv.Calls()
	again, _, err := Resolve(context.Background(), r, []policy.ListDefinition{news}, out, Options{Now: testenv.Now})
	if err != nil || srv.Calls() != calls || again.Lists["news"].ResolvedAt != n.ResolvedAt {
		t.Fatalf("unchanged list re-resolved: %d calls, err %v", srv.Calls()-calls, err)
	}
	other := policy.ListDefinition{Name: "other", Type: policy.MatchIdentifiers, GenerationPrompt: "x"}
	withOther := &policy.DynamicLists{Lists: map[string]policy.ResolvedList{"news": n, "other": {Values: []string{"A"}, InputHash: "stale"}}}
	if _, _, err := Resolve(context.Background(), r, []policy.ListDefinition{news, other}, withOther, Options{Only: []string{"news"}, Now: testenv.Now}); err != nil {
		t.Fatal(err)
	}
	if srv.Calls() != calls+1 {
		t.Errorf("Only=news made %d calls, want 1 (news refreshed, other kept)", srv.Calls()-calls)
	}
}
