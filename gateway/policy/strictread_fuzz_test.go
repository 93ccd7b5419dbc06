package policy

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// refRead reads one JSON value generically with exact names; a name given
// twice keeps its last (or first) value. It is the reader the policy's
// readers are held against.
func refRead(b []byte, firstWins bool) (any, error) {
	dec := jsontext.NewDecoder(strings.NewReader(string(b)), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var value func() (any, error)
	value = func() (any, error) {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		switch tok.Kind() {
		case 'n':
			return nil, nil
		case 't', 'f':
			return tok.Bool(), nil
		case '"':
			return tok.String(), nil
		case '0':
			return strconv.ParseFloat(tok.String(), 64)
		case '[':
			out := []any{}
			for dec.PeekKind() != ']' {
				v, err := value()
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.ReadToken()
			return out, err
		case '{':
			out := map[string]any{}
			for dec.PeekKind() != '}' {
				name, err := dec.ReadToken()
				if err != nil {
					return nil, err
				}
				k := name.String()
				v, err := value()
				if err != nil {
					return nil, err
				}
				if _, seen := out[k]; !seen || !firstWins {
					out[k] = v
				}
			}
			_, err := dec.ReadToken()
			return out, err
		}
		return nil, errors.New("unexpected token")
	}
	v, err := value()
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err == nil {
		return nil, errors.New("data after the value")
	}
	return v, nil
}

// FuzzCompiledPolicyDifferential: a compiled-policy.json the loader
// accepts has no name given twice (an exact last-wins and first-wins
// reader read the same file), its rules are what such a reader reads
// (name, then, reason), and every name in a rule's "if" is one the
// original reads exactly (no "Roles" taken for "roles").
func FuzzCompiledPolicyDifferential(f *testing.F) {
	for _, s := range []string{
		okPolicy,
		`{"Rules": [{"name": "r", "if": {}, "then": "allow", "reason": "x"}]}`,
		`{"rules": [{"name": "r", "if": {"Roles": ["read-path"]}, "then": "allow", "reason": "x"}]}`,
		`{"rules": [{"name": "r", "if": {}, "then": "allow", "then": "deny", "reason": "x"}]}`,
		`{"rules": [{"name": "r", "if": {"server": ["a"], "tool": ["t"]}, "then": "escalate", "reason": "x"}], "sandbox": "/w"}`,
	} {
		f.Add(s)
	}
	known := map[string]bool{"roles": true, "server": true, "tool": true, "paths": true, "domains": true, "lists": true}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := ParseCompiledPolicy(CompiledPolicyFile, []byte(body))
		if err != nil {
			return // refused
		}
		last, err1 := refRead([]byte(body), false)
		first, err2 := refRead([]byte(body), true)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(last, first) {
			t.Fatalf("disagreement: accepted a file the exact readers read differently (%v, %v): %q", err1, err2, body)
		}
		rules, _ := last.(map[string]any)["rules"].([]any)
		if len(rules) != len(p.Rules) {
			t.Fatalf("disagreement: %d rules read, %d loaded: %q", len(rules), len(p.Rules), body)
		}
		for i, r := range rules {
			m, _ := r.(map[string]any)
			reason, _ := m["reason"].(string)
			if m["name"] != p.Rules[i].Name || m["then"] != p.Rules[i].Then.String() || reason != p.Rules[i].Reason {
				t.Fatalf("disagreement: rule %d read as %v, loaded as %+v: %q", i, m, p.Rules[i], body)
			}
			cond, _ := m["if"].(map[string]any)
			for k := range cond {
				if !known[k] {
					t.Fatalf("disagreement: rule %d's if holds %q, which the original does not read: %q", i, k, body)
				}
			}
		}
	})
}
