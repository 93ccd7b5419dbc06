package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"ironcurtain.dev/gateway/netpolicy"
)

// DefaultDialTimeout bounds one Dial: the DNS lookup and every connection
// attempt together.
const DefaultDialTimeout = 10 * time.Second

// Resolver looks up the addresses of a host name. *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Allow lists the hosts Dial and DialContext may reach. Empty: none.
	Allow []netpolicy.Pattern
	// Addresses decides which resolved addresses may be dialed.
	Addresses netpolicy.AddressPolicy
	// Resolver defaults to net.DefaultResolver.
	Resolver Resolver
	// DialTimeout defaults to DefaultDialTimeout.
	DialTimeout time.Duration
	// KeepAlive is net.Dialer's KeepAliveConfig; the zero value is Go's
	// default (probes after 15 s idle, every 15 s).
	KeepAlive net.KeepAliveConfig
}

// Guard makes outbound TCP connections on behalf of the agent safely: it
// decides on the host name before any DNS lookup, resolves once, checks every
// address, and dials exactly an address it checked. The egress proxy and the
// fetch tool server both dial through it. A Guard is safe for concurrent use.
type Guard struct {
	allow    []netpolicy.Pattern
	addrs    netpolicy.AddressPolicy
	resolver Resolver
	timeout  time.Duration
	dialer   net.Dialer
}

// Errors a Guard returns; the concrete errors wrap them (errors.Is).
var (
	// ErrHostNotAllowed: the host matches no allowlist pattern.
	ErrHostNotAllowed = errors.New("host is not in the allowlist")
	// ErrResolve: the DNS lookup failed or returned no address.
	ErrResolve = errors.New("host does not resolve")
	// ErrBadNetwork: DialContext was asked for a network other than tcp/tcp4/tcp6.
	ErrBadNetwork = errors.New("only TCP may be dialed")
	// ErrUncheckedAddress: the dialer was about to connect to an address the
	// Guard did not check. It means a bug, never an agent's doing.
	ErrUncheckedAddress = errors.New("refusing to connect to an unchecked address")
)

// NewGuard returns a Guard for c.
func NewGuard(c GuardConfig) (*Guard, error) {
	for i, p := range c.Addresses.UnsafeAllow {
		if !p.IsValid() {
			return nil, fmt.Errorf("creating egress guard: unsafe address prefix [%d] is invalid", i)
		}
	}
	if c.DialTimeout < 0 {
		return nil, errors.New("creating egress guard: negative dial timeout")
	}
	g := &Guard{
		allow:    append([]netpolicy.Pattern(nil), c.Allow...),
		addrs:    netpolicy.AddressPolicy{UnsafeAllow: append([]netip.Prefix(nil), c.Addresses.UnsafeAllow...)},
		resolver: c.Resolver,
		timeout:  c.DialTimeout,
		dialer:   net.Dialer{KeepAliveConfig: c.KeepAlive},
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.timeout == 0 {
		g.timeout = DefaultDialTimeout
	}
	// Last line of defence: whatever the code above decided, the socket is
	// only connected to an address the policy allows.
	g.dialer.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %q", ErrUncheckedAddress, address)
		}
		if err := g.addrs.Check(ap.Addr()); err != nil {
			return fmt.Errorf("%w: %w", ErrUncheckedAddress, err)
		}
		return nil
	}
	return g, nil
}

// HostError is returned when a host is refused before any lookup.
type HostError struct {
	Host netpolicy.Host
	Err  error // ErrHostNotAllowed or a *netpolicy.AddressError for an IP literal
}

func (e *HostError) Error() string { return "egress to " + e.Host.String() + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *HostError) Unwrap() error { return e.Err }

// CheckHost decides on the host name alone, before any DNS lookup (so that a
// refused name is never sent to a resolver, where its labels could carry
// data out): the host must match the allowlist, and an IP literal must also
// pass the address policy.
func (g *Guard) CheckHost(h netpolicy.Host) error {
	if h.IsZero() {
		return &HostError{Host: h, Err: ErrHostNotAllowed}
	}
	if !netpolicy.MatchAny(g.allow, h) {
		return &HostError{Host: h, Err: ErrHostNotAllowed}
	}
	if h.IsIP() {
		if err := g.addrs.Check(h.Addr()); err != nil {
			return &HostError{Host: h, Err: err}
		}
	}
	return nil
}

// CheckAddress applies the Guard's address policy to a: nil if a may be
// dialed, else the policy's *netpolicy.AddressError.
func (g *Guard) CheckAddress(a netip.Addr) error { return g.addrs.Check(a) }

// AllowedBy returns the first allowlist pattern h matches, and false if it
// matches none. It is the allowlist half of CheckHost, for a caller that
// records which pattern allowed a host.
func (g *Guard) AllowedBy(h netpolicy.Host) (netpolicy.Pattern, bool) {
	return netpolicy.FirstMatch(g.allow, h)
}

// Dial checks h with CheckHost, resolves it once, checks every address it
// resolves to (any refused address refuses the whole answer), and connects
// to the first checked address that accepts, with no further lookup. It
// returns the connection and the address it is connected to.
func (g *Guard) Dial(ctx context.Context, h netpolicy.Host, port int) (net.Conn, netip.Addr, error) {
	if err := g.CheckHost(h); err != nil {
		return nil, netip.Addr{}, err
	}
	return g.DialHost(ctx, "tcp", h, port)
}

// DialApproved is Dial for a host the caller allowed by other means (a
// human's approval, a session approval): it skips the allowlist but applies
// everything else — one lookup, every address checked, only a checked
// address dialed, the socket-level check before connect.
func (g *Guard) DialApproved(ctx context.Context, h netpolicy.Host, port int) (net.Conn, netip.Addr, error) {
	if h.IsZero() {
		return nil, netip.Addr{}, &HostError{Host: h, Err: ErrHostNotAllowed}
	}
	return g.DialHost(ctx, "tcp", h, port)
}

// DialContext has the signature of http.Transport.DialContext: addr is
// "host:port" and is parsed with netpolicy.ParseAuthority, then dialed with
// Dial. Redirects followed by an http.Client are therefore checked on every
// hop.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil, fmt.Errorf("dialing %s %q: %w", network, addr, ErrBadNetwork)
	}
	h, port, err := netpolicy.ParseAuthority(addr, 0)
	if err != nil {
		return nil, fmt.Errorf("dialing %q: %w", addr, err)
	}
	if err := g.CheckHost(h); err != nil {
		return nil, err
	}
	c, _, err := g.DialHost(ctx, network, h, port)
	return c, err
}

// Resolve returns the addresses h may be dialed at: the literal for an IP
// host, else the answer of ONE lookup with IPv4-mapped answers unmapped. If
// any address is refused by the address policy, the whole answer is refused
// (an *AddressError naming the first refused address). It does not consult
// the allowlist.
func (g *Guard) Resolve(ctx context.Context, h netpolicy.Host) ([]netip.Addr, error) {
	if h.IsZero() {
		return nil, &HostError{Host: h, Err: ErrHostNotAllowed}
	}
	if h.IsIP() {
		if err := g.addrs.Check(h.Addr()); err != nil {
			return nil, &HostError{Host: h, Err: err}
		}
		return []netip.Addr{h.Addr()}, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", h.String())
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w: %w", h, ErrResolve, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolving %s: %w", h, ErrResolve)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if err := g.addrs.Check(a); err != nil {
			return nil, &HostError{Host: h, Err: err}
		}
		out = append(out, a)
	}
	return out, nil
}

// DialHost resolves and dials without consulting the allowlist: the caller
// has made the host decision (the proxy adds session approvals and
// escalations to the static allowlist). Everything else applies as in
// Dial: one lookup, every address checked, only a checked address dialed.
// network "tcp4" or "tcp6" restricts the addresses tried to that family;
// any other value dials TCP to either.
func (g *Guard) DialHost(ctx context.Context, network string, h netpolicy.Host, port int) (net.Conn, netip.Addr, error) {
	if port < 1 || port > 65535 {
		return nil, netip.Addr{}, fmt.Errorf("dialing %s: %w", h, netpolicy.ErrInvalidPort)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	addrs, err := g.Resolve(ctx, h)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	var firstErr error
	for _, a := range addrs {
		if network == "tcp4" && !a.Is4() || network == "tcp6" && a.Is4() {
			continue
		}
		c, err := g.dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, a, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%w: no %s address", ErrResolve, network)
	}
	return nil, netip.Addr{}, fmt.Errorf("dialing %s: %w", net.JoinHostPort(h.String(), strconv.Itoa(port)), firstErr)
}
