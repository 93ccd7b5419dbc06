package netpolicy

import (
	"errors"
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		addr string
		want Class
	}{
		{name: "public v4", addr: "8.8.8.8", want: Public},
		{name: "public v6", addr: "2606:4700:4700::1111", want: Public},
		{name: "this network", addr: "0.1.2.3", want: Unspecified},
		{name: "unspecified v4", addr: "0.0.0.0", want: Unspecified},
		{name: "rfc1918 10", addr: "10.1.2.3", want: Private},
		{name: "rfc1918 172", addr: "172.31.255.255", want: Private},
		{name: "not rfc1918 172.32", addr: "172.32.0.1", want: Public},
		{name: "rfc1918 192.168", addr: "192.168.1.1", want: Private},
		{name: "cgnat", addr: "100.64.0.1", want: CGNAT},
		{name: "cgnat end", addr: "100.127.255.255", want: CGNAT},
		{name: "after cgnat", addr: "100.128.0.1", want: Public},
		{name: "alibaba metadata", addr: "100.100.100.200", want: CGNAT | Metadata},
		{name: "loopback", addr: "127.0.0.1", want: Loopback},
		{name: "loopback other", addr: "127.255.0.9", want: Loopback},
		{name: "link-local", addr: "169.254.1.1", want: LinkLocal},
		{name: "metadata", addr: "169.254.169.254", want: LinkLocal | Metadata},
		{name: "ecs metadata", addr: "169.254.170.2", want: LinkLocal | Metadata},
		{name: "azure wireserver", addr: "168.63.129.16", want: Metadata},
		{name: "ietf protocol", addr: "192.0.0.8", want: Reserved},
		{name: "test-net-1", addr: "192.0.2.1", want: Documentation},
		{name: "6to4 relay", addr: "192.88.99.1", want: Reserved},
		{name: "benchmarking", addr: "198.19.0.1", want: Benchmarking},
		{name: "test-net-2", addr: "198.51.100.1", want: Documentation},
		{name: "test-net-3", addr: "203.0.113.1", want: Documentation},
		{name: "multicast v4", addr: "224.0.0.1", want: Multicast},
		{name: "multicast v4 end", addr: "239.255.255.255", want: Multicast},
		{name: "class e", addr: "240.0.0.1", want: Reserved},
		{name: "broadcast", addr: "255.255.255.255", want: Reserved | Broadcast},

		{name: "unspecified v6", addr: "::", want: Unspecified},
		{name: "loopback v6", addr: "::1", want: Loopback},
		{name: "mapped loopback", addr: "::ffff:127.0.0.1", want: IPv4Mapped | Loopback},
		{name: "mapped metadata", addr: "::ffff:169.254.169.254", want: IPv4Mapped | LinkLocal | Metadata},
		{name: "mapped public", addr: "::ffff:8.8.8.8", want: IPv4Mapped},
		{name: "compatible loopback", addr: "::127.0.0.1", want: IPv4Compatible | Loopback},
		{name: "compatible public", addr: "::8.8.8.8", want: IPv4Compatible},
		{name: "compatible low", addr: "::2", want: IPv4Compatible | Unspecified},
		{name: "translated loopback", addr: "::ffff:0:7f00:1", want: IPv4Translated | Loopback},
		{name: "6to4 loopback", addr: "2002:7f00:1::", want: SixToFour | Loopback},
		{name: "6to4 private", addr: "2002:c0a8:101::1", want: SixToFour | Private},
		{name: "6to4 public", addr: "2002:808:808::1", want: SixToFour},
		{name: "nat64 metadata", addr: "64:ff9b::a9fe:a9fe", want: NAT64 | LinkLocal | Metadata},
		{name: "nat64 loopback", addr: "64:ff9b::127.0.0.1", want: NAT64 | Loopback},
		{name: "nat64 public", addr: "64:ff9b::808:808", want: NAT64},
		{name: "nat64 local-use", addr: "64:ff9b:1::1", want: NAT64},
		{name: "teredo rfc example", addr: "2001:0:4136:e378:8000:63bf:3fff:fdd2", want: Teredo | Reserved | Documentation},
		{name: "teredo loopback client", addr: "2001:0:808:808::80ff:fffe", want: Teredo | Reserved | Loopback},
		{name: "teredo loopback server", addr: "2001:0:7f00:1::f7f7:f7f7", want: Teredo | Reserved | Loopback},
		{name: "discard", addr: "100::1", want: Reserved},
		{name: "ietf v6", addr: "2001:1::1", want: Reserved},
		{name: "benchmarking v6", addr: "2001:2::1", want: Reserved | Benchmarking},
		{name: "documentation v6", addr: "2001:db8::1", want: Documentation},
		{name: "documentation 3fff", addr: "3fff::1", want: Documentation},
		{name: "srv6", addr: "5f00::1", want: Reserved},
		{name: "ula", addr: "fd12:3456::1", want: Private},
		{name: "ula fc", addr: "fc00::1", want: Private},
		{name: "aws v6 metadata", addr: "fd00:ec2::254", want: Private | Metadata},
		{name: "link-local v6", addr: "fe80::1", want: LinkLocal},
		{name: "site-local", addr: "fec0::1", want: Private},
		{name: "multicast v6", addr: "ff02::1", want: Multicast},
		{name: "unallocated v6", addr: "4000::1", want: Reserved},
		{name: "low unallocated v6", addr: "1::1", want: Reserved},
		{name: "zoned", addr: "fe80::1%eth0", want: LinkLocal | Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			if got := Classify(a); got != tt.want {
				t.Fatalf("Classify(%s) = %s; want %s", a, got, tt.want)
			}
		})
	}
	if Classify(netip.Addr{}) != Invalid {
		t.Fatal("the zero Addr must be Invalid")
	}
}

func TestAddressPolicyCheck(t *testing.T) {
	nat64Allowed := AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96")}}
	loopbackAllowed := AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	tests := []struct {
		name      string
		policy    AddressPolicy
		addr      string
		wantClass Class // Public: allowed
	}{
		{name: "public", addr: "93.184.215.14", wantClass: Public},
		{name: "loopback denied", addr: "127.0.0.1", wantClass: Loopback},
		{name: "metadata denied", addr: "169.254.169.254", wantClass: Metadata},
		{name: "mapped denied", addr: "::ffff:93.184.215.14", wantClass: IPv4Mapped},
		{name: "nat64 denied", addr: "64:ff9b::808:808", wantClass: NAT64},
		{name: "loopback unsafe allowed", policy: loopbackAllowed, addr: "127.0.0.1", wantClass: Public},
		{name: "unsafe does not cover mapped", policy: loopbackAllowed, addr: "::ffff:127.0.0.1", wantClass: IPv4Mapped},
		{name: "unsafe does not cover v6 loopback", policy: loopbackAllowed, addr: "::1", wantClass: Loopback},
		{name: "unsafe does not cover metadata", policy: loopbackAllowed, addr: "169.254.169.254", wantClass: Metadata},
		{name: "nat64 prefix allowed, public inside", policy: nat64Allowed, addr: "64:ff9b::808:808", wantClass: Public},
		{name: "nat64 prefix allowed, metadata inside", policy: nat64Allowed, addr: "64:ff9b::a9fe:a9fe", wantClass: Metadata},
		{name: "nat64 prefix allowed, loopback inside", policy: nat64Allowed, addr: "64:ff9b::7f00:1", wantClass: Loopback},
		{name: "nat64 and loopback allowed", policy: AddressPolicy{UnsafeAllow: append(nat64Allowed.UnsafeAllow, netip.MustParsePrefix("127.0.0.0/8"))},
			addr: "64:ff9b::7f00:1", wantClass: Public},
		{name: "teredo allowed, loopback client", policy: AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("2001::/32")}},
			addr: "2001:0:808:808::80ff:fffe", wantClass: Loopback},
		{name: "zone never allowed", policy: AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("fe80::/10")}},
			addr: "fe80::1%eth0", wantClass: Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Check(netip.MustParseAddr(tt.addr))
			if tt.wantClass == Public {
				if err != nil {
					t.Fatalf("Check(%s) = %v; want allowed", tt.addr, err)
				}
				return
			}
			if !errors.Is(err, ErrAddressDenied) || !errors.Is(err, tt.wantClass) {
				t.Fatalf("Check(%s) = %v; want denied as %s", tt.addr, err, tt.wantClass)
			}
			var ae *AddressError
			if !errors.As(err, &ae) || ae.Addr.String() != netip.MustParseAddr(tt.addr).String() {
				t.Fatalf("error %v does not carry the address", err)
			}
		})
	}
	if err := (AddressPolicy{}).Check(netip.Addr{}); !errors.Is(err, Invalid) {
		t.Fatalf("Check(zero) = %v; want Invalid", err)
	}
}

func TestClassString(t *testing.T) {
	tests := []struct {
		name string
		c    Class
		want string
	}{
		{name: "public", c: Public, want: "public"},
		{name: "one", c: Loopback, want: "loopback"},
		{name: "two", c: IPv4Mapped | Loopback, want: "loopback+ipv4-mapped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.String(); got != tt.want {
				t.Fatalf("String() = %q; want %q", got, tt.want)
			}
			if got := tt.c.Error(); got != tt.want {
				t.Fatalf("Error() = %q; want %q", got, tt.want)
			}
		})
	}
	if !(Loopback | Private).Has(Loopback) || Loopback.Has(Loopback|Private) {
		t.Fatal("Has is wrong")
	}
}

// classifyV4's integer masks agree with netip.Prefix.Contains at every range
// edge and on random addresses.
func TestClassifyV4MatchesPrefixes(t *testing.T) {
	ref := func(a netip.Addr) Class {
		var c Class
		for _, cp := range v4Classes {
			if cp.p.Contains(a) {
				c |= cp.c
			}
		}
		return c
	}
	var addrs []netip.Addr
	for _, cp := range v4Classes {
		first := cp.p.Masked().Addr()
		b := first.As4()
		x := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		x |= ^uint32(0) >> cp.p.Bits()
		last := netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
		addrs = append(addrs, first, last, first.Prev(), last.Next())
	}
	seed := uint32(2463534242)
	for i := 0; i < 20000; i++ {
		seed ^= seed << 13
		seed ^= seed >> 17
		seed ^= seed << 5
		addrs = append(addrs, netip.AddrFrom4([4]byte{byte(seed >> 24), byte(seed >> 16), byte(seed >> 8), byte(seed)}))
	}
	for _, a := range addrs {
		if !a.IsValid() {
			continue
		}
		if got, want := classifyV4(a), ref(a); got != want {
			t.Fatalf("classifyV4(%v) = %v; want %v", a, got, want)
		}
	}
}
