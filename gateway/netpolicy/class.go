package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
)

// Class is a set of special-purpose address classes (a bit set). The zero
// Class is Public: an address in no special-purpose range. An IPv6 address
// that embeds an IPv4 address carries both its own class and the embedded
// address's classes (for example ::ffff:127.0.0.1 is IPv4Mapped|Loopback).
//
// Class implements error so that errors.Is(err, netpolicy.Loopback) works on
// the errors AddressPolicy.Check returns.
type Class uint32

// Address classes. Sources: the IANA IPv4 and IPv6 Special-Purpose Address
// Registries, RFC 6890, plus the cloud metadata endpoints.
const (
	Public         Class = 0
	Invalid        Class = 1 << (iota - 1) // not a valid address, or one with a zone
	Unspecified                            // 0.0.0.0/8 ("this network"), ::/128
	Loopback                               // 127.0.0.0/8, ::1
	Private                                // 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10
	LinkLocal                              // 169.254.0.0/16, fe80::/10
	Metadata                               // cloud instance metadata: 169.254.169.254, fd00:ec2::254, ...
	CGNAT                                  // 100.64.0.0/10 shared address space
	Multicast                              // 224.0.0.0/4, ff00::/8
	Broadcast                              // 255.255.255.255
	IPv4Mapped                             // ::ffff:0:0/96
	IPv4Compatible                         // ::/96 (deprecated IPv4-compatible)
	IPv4Translated                         // ::ffff:0:0:0/96 (SIIT)
	SixToFour                              // 2002::/16
	NAT64                                  // 64:ff9b::/96, 64:ff9b:1::/48
	Teredo                                 // 2001::/32
	Documentation                          // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20
	Benchmarking                           // 198.18.0.0/15, 2001:2::/48
	Reserved                               // 192.0.0.0/24, 192.88.99.0/24, 240.0.0.0/4, 100::/64, 2001::/23, 5f00::/16, IPv6 outside 2000::/3
)

var classNames = [...]struct {
	c    Class
	name string
}{
	{Invalid, "invalid"}, {Unspecified, "unspecified"}, {Loopback, "loopback"},
	{Private, "private"}, {LinkLocal, "link-local"}, {Metadata, "metadata"},
	{CGNAT, "cgnat"}, {Multicast, "multicast"}, {Broadcast, "broadcast"},
	{IPv4Mapped, "ipv4-mapped"}, {IPv4Compatible, "ipv4-compatible"},
	{IPv4Translated, "ipv4-translated"}, {SixToFour, "6to4"}, {NAT64, "nat64"},
	{Teredo, "teredo"}, {Documentation, "documentation"},
	{Benchmarking, "benchmarking"}, {Reserved, "reserved"},
}

// String returns the class names joined with '+' ("ipv4-mapped+loopback"),
// or "public".
func (c Class) String() string {
	if c == Public {
		return "public"
	}
	var b strings.Builder
	for _, n := range classNames {
		if c&n.c != 0 {
			if b.Len() > 0 {
				b.WriteByte('+')
			}
			b.WriteString(n.name)
		}
	}
	return b.String()
}

// Error implements error (see the type comment); it is the same as String,
// so a Class prints the same with %v whether or not fmt sees it as an error.
func (c Class) Error() string { return c.String() }

// Has reports whether c includes every class in o.
func (c Class) Has(o Class) bool { return c&o == o }

type classPrefix struct {
	p netip.Prefix
	c Class
}

var v4Classes = []classPrefix{
	{netip.MustParsePrefix("0.0.0.0/8"), Unspecified},
	{netip.MustParsePrefix("10.0.0.0/8"), Private},
	{netip.MustParsePrefix("100.64.0.0/10"), CGNAT},
	{netip.MustParsePrefix("100.100.100.200/32"), Metadata}, // Alibaba Cloud
	{netip.MustParsePrefix("127.0.0.0/8"), Loopback},
	{netip.MustParsePrefix("168.63.129.16/32"), Metadata}, // Azure wire server (a public address)
	{netip.MustParsePrefix("169.254.0.0/16"), LinkLocal},
	{netip.MustParsePrefix("169.254.169.254/32"), Metadata}, // AWS, GCP, Azure, OCI, ...
	{netip.MustParsePrefix("169.254.170.2/32"), Metadata},   // AWS ECS task metadata
	{netip.MustParsePrefix("172.16.0.0/12"), Private},
	{netip.MustParsePrefix("192.0.0.0/24"), Reserved},
	{netip.MustParsePrefix("192.0.2.0/24"), Documentation},
	{netip.MustParsePrefix("192.88.99.0/24"), Reserved},
	{netip.MustParsePrefix("192.168.0.0/16"), Private},
	{netip.MustParsePrefix("198.18.0.0/15"), Benchmarking},
	{netip.MustParsePrefix("198.51.100.0/24"), Documentation},
	{netip.MustParsePrefix("203.0.113.0/24"), Documentation},
	{netip.MustParsePrefix("224.0.0.0/4"), Multicast},
	{netip.MustParsePrefix("240.0.0.0/4"), Reserved},
	{netip.MustParsePrefix("255.255.255.255/32"), Broadcast},
}

var v6Classes = []classPrefix{
	{netip.MustParsePrefix("::/128"), Unspecified},
	{netip.MustParsePrefix("::1/128"), Loopback},
	{netip.MustParsePrefix("::ffff:0:0/96"), IPv4Mapped},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), IPv4Translated},
	{netip.MustParsePrefix("64:ff9b::/96"), NAT64},
	{netip.MustParsePrefix("64:ff9b:1::/48"), NAT64},
	{netip.MustParsePrefix("100::/64"), Reserved},
	{netip.MustParsePrefix("2001::/23"), Reserved},
	{netip.MustParsePrefix("2001::/32"), Teredo},
	{netip.MustParsePrefix("2001:2::/48"), Benchmarking},
	{netip.MustParsePrefix("2001:db8::/32"), Documentation},
	{netip.MustParsePrefix("2002::/16"), SixToFour},
	{netip.MustParsePrefix("3fff::/20"), Documentation},
	{netip.MustParsePrefix("5f00::/16"), Reserved},
	{netip.MustParsePrefix("fc00::/7"), Private},
	{netip.MustParsePrefix("fd00:ec2::254/128"), Metadata}, // AWS IMDS over IPv6
	{netip.MustParsePrefix("fe80::/10"), LinkLocal},
	{netip.MustParsePrefix("fec0::/10"), Private}, // deprecated site-local
	{netip.MustParsePrefix("ff00::/8"), Multicast},
}

var globalUnicast = netip.MustParsePrefix("2000::/3")

// Classify returns every special-purpose class a belongs to; Public when
// none. A zoned address is Invalid in addition to its classes.
func Classify(a netip.Addr) Class {
	if !a.IsValid() {
		return Invalid
	}
	var c Class
	if a.Zone() != "" {
		c |= Invalid
		a = a.WithZone("")
	}
	if a.Is4() {
		return c | classifyV4(a)
	}
	for _, cp := range v6Classes {
		if cp.p.Contains(a) {
			c |= cp.c
		}
	}
	if c&(Unspecified|Loopback) == 0 && isCompatible(a) {
		c |= IPv4Compatible
	}
	if !globalUnicast.Contains(a) && c&^Invalid == 0 {
		c |= Reserved
	}
	for _, e := range embeddedV4(a, c) {
		if e.IsValid() {
			c |= classifyV4(e)
		}
	}
	return c
}

// embeddedV4 returns the IPv4 addresses embedded in a (of class c): the
// mapped, compatible, translated or NAT64 (/96) address, the 6to4 address,
// or Teredo's server and (de-obfuscated) client addresses.
func embeddedV4(a netip.Addr, c Class) [2]netip.Addr {
	b := a.As16()
	switch {
	case c&(IPv4Mapped|IPv4Compatible|IPv4Translated) != 0:
		return [2]netip.Addr{v4At(b, 12)}
	case c&SixToFour != 0:
		return [2]netip.Addr{v4At(b, 2)}
	case c&NAT64 != 0 && b[4] == 0 && b[5] == 0: // 64:ff9b::/96 (not the /48)
		return [2]netip.Addr{v4At(b, 12)}
	case c&Teredo != 0:
		client := v4At(b, 12).As4()
		for i := range client {
			client[i] ^= 0xff
		}
		return [2]netip.Addr{v4At(b, 4), netip.AddrFrom4(client)}
	}
	return [2]netip.Addr{}
}

// v4Ranges is v4Classes as integer masks (classifyV4 is on every dial).
var v4Ranges = func() []v4Range {
	out := make([]v4Range, len(v4Classes))
	for i, cp := range v4Classes {
		out[i] = v4Range{base: v4Uint(cp.p.Addr()), mask: ^uint32(0) << (32 - cp.p.Bits()), c: cp.c}
	}
	return out
}()

type v4Range struct {
	base, mask uint32
	c          Class
}

func v4Uint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func classifyV4(a netip.Addr) Class {
	x := v4Uint(a)
	var c Class
	for _, r := range v4Ranges {
		if x&r.mask == r.base {
			c |= r.c
		}
	}
	return c
}

// isCompatible reports whether a is in ::/96.
func isCompatible(a netip.Addr) bool {
	b := a.As16()
	for i := 0; i < 12; i++ {
		if b[i] != 0 {
			return false
		}
	}
	return true
}

func v4At(b [16]byte, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]})
}

// ErrAddressDenied is matched (errors.Is) by every error AddressPolicy.Check
// returns.
var ErrAddressDenied = errors.New("address not allowed")

// AddressError is the error AddressPolicy.Check returns. errors.Is matches
// ErrAddressDenied and every Class the address belongs to.
type AddressError struct {
	Addr  netip.Addr
	Class Class
}

// Error names the address and its class: "address 127.0.0.1 is not public (loopback)".
func (e *AddressError) Error() string {
	return "address " + e.Addr.String() + " is not public (" + e.Class.String() + ")"
}

// Is supports errors.Is(err, ErrAddressDenied) and errors.Is(err, Loopback).
func (e *AddressError) Is(target error) bool {
	if target == ErrAddressDenied {
		return true
	}
	if c, ok := target.(Class); ok {
		return c != Public && e.Class.Has(c)
	}
	return false
}

// AddressPolicy decides which resolved addresses may be dialed: every
// address that is not Public is denied unless a prefix in UnsafeAllow
// contains it. Prefixes match the address as it is: 127.0.0.0/8 does not
// allow ::ffff:127.0.0.1. An allowed IPv6 address that embeds IPv4
// addresses (mapped, 6to4, NAT64, Teredo, ...) is allowed only if each
// embedded address is allowed too, so that allowing a NAT64 prefix such as
// 64:ff9b::/96 does not open 64:ff9b::169.254.169.254. Invalid and zoned
// addresses are always denied.
type AddressPolicy struct {
	UnsafeAllow []netip.Prefix
}

// Check returns nil when a may be dialed, else an *AddressError.
func (p AddressPolicy) Check(a netip.Addr) error {
	c := Classify(a)
	if c == Public {
		return nil
	}
	if c&Invalid == 0 && p.unsafeAllowed(a) {
		allowed := true
		if a.Is6() {
			for _, e := range embeddedV4(a, c) {
				if e.IsValid() && Classify(e) != Public && !p.unsafeAllowed(e) {
					allowed = false
				}
			}
		}
		if allowed {
			return nil
		}
	}
	return &AddressError{Addr: a, Class: c}
}

func (p AddressPolicy) unsafeAllowed(a netip.Addr) bool {
	for _, pr := range p.UnsafeAllow {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}
