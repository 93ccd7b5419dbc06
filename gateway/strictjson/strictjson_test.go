package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type gqlBody struct {
	Query         string                     `json:"query"`
	OperationName string                     `json:"operationName,omitempty"`
	Variables     map[string]json.RawMessage `json:"variables,omitempty"`
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		in   string
		lim  Limits
		want string // substring of the refusal; "" accepts
	}{
		{name: "object", in: `{"a":1,"b":[1,2,{"c":"d"}]}`},
		{name: "surrounding space", in: " \n{\"a\":1}\t\r\n"},
		{name: "scalar", in: `"x"`},
		{name: "duplicate name", in: `{"query":"a","query":"b"}`, want: "twice"},
		{name: "duplicate via escape", in: `{"query":"a","\u0071uery":"b"}`, want: "twice"},
		{name: "duplicate nested", in: `{"v":{"id":1,"id":2}}`, want: "twice"},
		{name: "case differs is not a duplicate", in: `{"query":"a","Query":"b"}`},
		{name: "trailing value", in: `{"a":1}{"a":2}`, want: "after"},
		{name: "trailing garbage", in: `{"a":1} x`, want: "after"},
		{name: "trailing NUL", in: "{\"a\":1}\x00", want: "after"},
		{name: "truncated", in: `{"a":`, want: "ends before"},
		{name: "empty", in: ``, want: "ends before"},
		{name: "invalid utf8", in: "{\"a\":\"\xff\"}", want: "not valid"},
		{name: "depth", in: `[[[[1]]]]`, lim: Limits{MaxDepth: 3}, want: "deeper"},
		{name: "depth at bound", in: `[[[1]]]`, lim: Limits{MaxDepth: 3}},
		{name: "members", in: `{"a":1,"b":{"c":2}}`, lim: Limits{MaxMembers: 2}, want: "members"},
		{name: "members at bound", in: `{"a":1,"b":2}`, lim: Limits{MaxMembers: 2}},
		{name: "elements", in: `[1,[2,3]]`, lim: Limits{MaxElements: 3}, want: "elements"},
		{name: "elements at bound", in: `[1,2,3]`, lim: Limits{MaxElements: 3}},
		{name: "string", in: `{"a":"12345"}`, lim: Limits{MaxString: 4}, want: "longer"},
		{name: "long name", in: `{"abcde":1}`, lim: Limits{MaxString: 4}, want: "longer"},
		{name: "bytes", in: `{"a":"12345"}`, lim: Limits{MaxBytes: 5}, want: "larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.in), tt.lim)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tt.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check(%q) = %v, want a refusal containing %q", tt.in, err, tt.want)
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Check(%q) = %v, not ErrRefused", tt.in, err)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want gqlBody
		err  string
	}{
		{name: "exact", in: `{"query":"{ viewer { login } }","variables":{"id":"X"}}`,
			want: gqlBody{Query: "{ viewer { login } }", Variables: map[string]json.RawMessage{"id": json.RawMessage(`"X"`)}}},
		// The reported differential: encoding/json would read Query into
		// the query field, the upstream reads "query".
		{name: "second key differs in case", in: `{"query":"{ a }","Query":"mutation { m }"}`, err: "unknown name"},
		{name: "only the folded key", in: `{"Query":"mutation { m }"}`, err: "unknown name"},
		{name: "variables folded", in: `{"query":"q","Variables":{}}`, err: "unknown name"},
		{name: "duplicate", in: `{"query":"q","query":"mutation { m }"}`, err: "twice"},
		{name: "unknown top-level", in: `{"query":"q","extensions":{}}`, err: "unknown name"},
		{name: "map keeps case", in: `{"query":"q","variables":{"Id":1,"id":2}}`,
			want: gqlBody{Query: "q", Variables: map[string]json.RawMessage{"Id": json.RawMessage(`1`), "id": json.RawMessage(`2`)}}},
		{name: "wrong type", in: `{"query":1}`, err: "does not fit"},
		{name: "trailing", in: `{"query":"q"} {}`, err: "after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got gqlBody
			err := Decode([]byte(tt.in), &got, Limits{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrRefused) {
					t.Fatalf("Decode(%q) = %v, want a refusal containing %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%q) = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	in := gqlBody{Query: "q", Variables: map[string]json.RawMessage{"b": json.RawMessage(`2`), "a": json.RawMessage(`"x"`)}}
	b, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"query":"q","variables":{"a":"x","b":2}}`; string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}
	var back gqlBody
	if err := Decode(b, &back, Limits{}); err != nil || !reflect.DeepEqual(back, in) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

// exactLastWins reads an object the way an exact-key, last-duplicate-wins
// server does (encoding/json into a map is exact-keyed and last-wins).
func exactLastWins(data []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// FuzzDifferential: whatever Decode accepts, an exact-key last-wins reader
// must read the same way, field by field; otherwise the gateway and the
// upstream could act on different requests.
func FuzzDifferential(f *testing.F) {
	for _, s := range []string{
		`{"query":"q"}`, `{"query":"a","Query":"b"}`, `{"query":"a","query":"b"}`,
		`{"query":"q","variables":{"x":1}}`, `{"qu\u0065ry":"q"}`, `{"query":"q"}  `,
		`{"query":"q","operationName":"o","variables":{"a":{"b":[1,2]}}}`, `{"QUERY":"x"}`,
		"{\"query\":\"\\ud800\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ours gqlBody
		if err := Decode(data, &ours, Limits{}); err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("refusal %v is not ErrRefused", err)
			}
			return
		}
		theirs, err := exactLastWins(data)
		if err != nil {
			t.Fatalf("we accepted %q, an exact reader refuses it: %v", data, err)
		}
		for k := range theirs {
			if k != "query" && k != "operationName" && k != "variables" {
				t.Fatalf("we accepted %q with a member %q the upstream reads", data, k)
			}
		}
		var q string
		if raw, ok := theirs["query"]; ok {
			if err := json.Unmarshal(raw, &q); err != nil {
				t.Fatalf("query of %q: %v", data, err)
			}
		}
		if q != ours.Query {
			t.Fatalf("%q: we judged query %q, the upstream runs %q", data, ours.Query, q)
		}
		// What we forward is what we judged.
		fwd, err := Marshal(ours)
		if err != nil {
			t.Fatal(err)
		}
		var again gqlBody
		if err := Decode(fwd, &again, Limits{}); err != nil || again.Query != ours.Query || len(again.Variables) != len(ours.Variables) {
			t.Fatalf("re-encoded %q does not decode to what was judged: %v", fwd, err)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	body := []byte(`{"query":"mutation($id:ID!,$body:String!){addComment(input:{subjectId:$id,body:$body}){clientMutationId}}","variables":{"id":"PR_kwDOA","body":"looks good to me"}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := Check(body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"query":"mutation($id:ID!,$body:String!){addComment(input:{subjectId:$id,body:$body}){clientMutationId}}","variables":{"id":"PR_kwDOA","body":"looks good to me"}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var v gqlBody
		if err := Decode(body, &v, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
