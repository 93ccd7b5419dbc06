package netwrap

import (
	"net"
	"testing"
)

// wrap is a wrapper exposing the connection under it.
type wrap struct {
	net.Conn
	name string
}

func (w *wrap) NetConn() net.Conn { return w.Conn }

// marked is a second wrapper type, to be found.
type marked struct{ wrap }

// opaque wraps without exposing what it wraps.
type opaque struct{ net.Conn }

// self is a broken wrapper that returns itself.
type self struct{ net.Conn }

func (s *self) NetConn() net.Conn { return s }

func chain(inner net.Conn, n int) net.Conn {
	c := inner
	for i := range n {
		c = &wrap{Conn: c, name: string(rune('a' + i))}
	}
	return c
}

func TestFind(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	m := &marked{wrap{Conn: a, name: "m"}}
	outer := &marked{wrap{Conn: chain(m, 2), name: "outer"}}
	tests := []struct {
		name string
		c    net.Conn
		want net.Conn // nil: not found
	}{
		{"nil", nil, nil},
		{"itself", m, m},
		{"under one", &wrap{Conn: m}, m},
		{"under seven", chain(m, 7), m},
		{"eight deep is too deep", chain(m, 8), nil},
		{"absent", chain(a, 3), nil},
		{"behind an opaque wrapper", &wrap{Conn: &opaque{m}}, nil},
		{"the outermost of two", outer, outer},
		{"a wrapper returning itself", &self{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Find[*marked](tt.c)
			if tt.want == nil {
				if ok || got != nil {
					t.Fatalf("Find = %v, %v; want none", got, ok)
				}
				return
			}
			if !ok || got != tt.want {
				t.Fatalf("Find = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

func TestRaw(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	op := &opaque{a}
	s := &self{}
	empty := &wrap{}
	tests := []struct {
		name string
		c    net.Conn
		want net.Conn
	}{
		{"bare", a, a},
		{"under three", chain(a, 3), a},
		{"stops at an opaque wrapper", chain(op, 2), op},
		{"a wrapper returning itself", s, s},
		{"a wrapper of nothing stays", empty, empty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Raw(tt.c)
			if got != tt.want {
				t.Fatalf("Raw = %v; want %v", got, tt.want)
			}
		})
	}
	// Nine wrappers: Raw stops maxDepth in, at the last wrapper, not below.
	deep := chain(a, 9)
	if got := Raw(deep); got == a {
		t.Errorf("Raw went past maxDepth")
	}
}
