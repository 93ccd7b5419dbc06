package escalation

import (
	"bytes"
	"strings"
	"testing"
)

func TestExactDigest(t *testing.T) {
	base := exactReq("c1", "s3cret")
	stored := newExactDigest(base)
	tests := []struct {
		name   string
		stored string
		req    Request
		want   bool
	}{
		{name: "same call", stored: stored, req: exactReq("c2", "s3cret"), want: true},
		{name: "other secret", stored: stored, req: exactReq("c2", "other"), want: false},
		{name: "other tool", stored: stored, req: withTool(exactReq("c2", "s3cret"), "write_file"), want: false},
		{name: "server and tool boundary", stored: newExactDigest(Request{Kind: KindToolCall, Server: "ab", Tool: "c", Exact: []byte("{}")}),
			req: Request{Kind: KindToolCall, Server: "a", Tool: "bc", Exact: []byte("{}")}, want: false},
		{name: "no exact call", stored: stored, req: func() Request { r := exactReq("c2", "s3cret"); r.Exact = nil; return r }(), want: false},
		{name: "empty stored", stored: "", req: base, want: false},
		{name: "unknown version", stored: "v2" + strings.TrimPrefix(stored, "v1"), req: base, want: false},
		{name: "no salt", stored: "v1::" + strings.SplitN(stored, ":", 3)[2], req: base, want: false},
		{name: "bad hex", stored: stored[:len(stored)-1] + "z", req: base, want: false},
		{name: "short mac", stored: stored[:len(stored)-2], req: base, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exactMatches(tt.stored, tt.req); got != tt.want {
				t.Fatalf("exactMatches(%q) = %v, want %v", tt.stored, got, tt.want)
			}
		})
	}
	t.Run("salted: equal calls store different digests", func(t *testing.T) {
		if a, b := newExactDigest(base), newExactDigest(base); a == b {
			t.Fatalf("two escalations of one call stored the same digest %s", a)
		}
	})
	t.Run("the secret is not stored", func(t *testing.T) {
		if strings.Contains(stored, "s3cret") {
			t.Fatal("digest contains the secret")
		}
	})
	t.Run("nothing stored without an exact call or for egress", func(t *testing.T) {
		r := base
		r.Exact = nil
		e := base
		e.Kind = KindEgress
		if newExactDigest(r) != "" || newExactDigest(e) != "" {
			t.Fatal("digest stored for a request no retry may use")
		}
	})
}

// FuzzExactMatches: arbitrary stored text never panics and never matches
// unless it is the digest of that very call; a digest matches its own call
// and no other.
func FuzzExactMatches(f *testing.F) {
	f.Add("v1:00:00", []byte(`{}`), []byte(`{"a":1}`))
	f.Add(newExactDigest(exactReq("c", "x")), []byte(`{"agent":{}}`), []byte(`{"agent":{ }}`))
	f.Add("v1:zz:zz", []byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, stored string, exact, other []byte) {
		r := Request{Kind: KindToolCall, Server: "filesystem", Tool: "move_file", Exact: exact}
		_ = exactMatches(stored, r)
		if len(exact) == 0 {
			if exactMatches(stored, r) {
				t.Fatal("a request without an exact call matched")
			}
			return
		}
		d := newExactDigest(r)
		if !exactMatches(d, r) {
			t.Fatalf("digest %s does not match its own call", d)
		}
		o := r
		o.Exact = other
		if !bytes.Equal(exact, other) && exactMatches(d, o) {
			t.Fatalf("digest of %q matched %q", exact, other)
		}
	})
}

func BenchmarkExactMatches(b *testing.B) {
	r := exactReq("c", "s3cret")
	d := newExactDigest(r)
	b.ReportAllocs()
	for b.Loop() {
		if !exactMatches(d, r) {
			b.Fatal("no match")
		}
	}
}
