package strictjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeChecked: without the shape check, every refusal that is not a
// limit still holds.
func TestDecodeChecked(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  string // substring of the refusal; "" accepts
	}{
		{name: "exact", in: `{"query":"q","variables":{"id":"X"}}`},
		{name: "folded name", in: `{"Query":"q"}`, err: "unknown name"},
		{name: "second key differs in case", in: `{"query":"{ a }","Query":"mutation { m }"}`, err: "unknown name"},
		{name: "unknown name", in: `{"query":"q","extensions":{}}`, err: "unknown name"},
		{name: "duplicate", in: `{"query":"q","query":"m"}`, err: "not valid"},
		{name: "duplicate via escape", in: `{"query":"q","\u0071uery":"m"}`, err: "not valid"},
		{name: "duplicate in a map", in: `{"query":"q","variables":{"a":1,"a":2}}`, err: "not valid"},
		{name: "invalid utf8", in: "{\"query\":\"\xff\"}", err: "not valid"},
		{name: "trailing", in: `{"query":"q"} {}`, err: "not valid"},
		{name: "truncated", in: `{"query":`, err: "not valid"},
		{name: "wrong type", in: `{"query":1}`, err: "does not fit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got gqlBody
			err := DecodeChecked([]byte(tt.in), &got)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("DecodeChecked(%q) = %v", tt.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrRefused) {
				t.Fatalf("DecodeChecked(%q) = %v, want a refusal containing %q", tt.in, err, tt.err)
			}
		})
	}
}

// FuzzDecodeChecked: on data that passes Check, DecodeChecked accepts and
// refuses what Decode does and decodes the same value.
func FuzzDecodeChecked(f *testing.F) {
	for _, s := range []string{
		`{"query":"q"}`, `{"query":"a","Query":"b"}`, `{"query":"a","query":"b"}`,
		`{"query":"q","variables":{"x":1,"x":2}}`, `{"qu\u0065ry":"q"}`, `{"query":"q"}  `, `{"query":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if Check(data, Limits{}) != nil {
			return
		}
		var a, b gqlBody
		errA, errB := Decode(data, &a, Limits{}), DecodeChecked(data, &b)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("%q: Decode %v, DecodeChecked %v", data, errA, errB)
		}
		if errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: Decode %+v, DecodeChecked %+v", data, a, b)
		}
	})
}
