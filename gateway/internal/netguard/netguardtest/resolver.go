// Package netguardtest is a DNS resolver for tests of code that dials
// through a netguard.Guard: it answers from a table and counts lookups, so a
// test can prove that a name was (or was never) sent to a resolver.
package netguardtest

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"sync"
)

// Resolver answers from a table; answers[name][i] is the i-th answer (the
// last one repeats), so a test can change the answer between lookups. It
// satisfies netguard.Resolver and is safe for concurrent use.
type Resolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups map[string]int
}

// NewResolver returns a Resolver that knows no name.
func NewResolver() *Resolver {
	return &Resolver{answers: map[string][][]netip.Addr{}, lookups: map[string]int{}}
}

// Set appends one answer for name (the addresses in order) and returns r.
func (r *Resolver) Set(name string, answers ...string) *Resolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	var as []netip.Addr
	for _, a := range answers {
		as = append(as, netip.MustParseAddr(a))
	}
	r.answers[name] = append(r.answers[name], as)
	return r
}

// LookupNetIP returns the next answer for host, or a not-found DNS error
// for a name with none.
func (r *Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.lookups[host]
	r.lookups[host]++
	list := r.answers[host]
	if len(list) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if n >= len(list) {
		n = len(list) - 1
	}
	return list[n], nil
}

// Count is the number of lookups of host.
func (r *Resolver) Count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// Total is the number of lookups the resolver was asked for, every name.
func (r *Resolver) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.lookups {
		n += c
	}
	return n
}

// Lookups is a copy of the lookup count per name.
func (r *Resolver) Lookups() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.lookups)
}
