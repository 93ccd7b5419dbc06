package netpolicy

import (
	"net/netip"
	"strings"
)

// metadataNames are host names that resolve to a cloud instance metadata
// service inside the cloud that serves it (or that a resolver's search
// domains may turn into one). They are special whatever DNS says outside.
var metadataNames = map[string]bool{
	"metadata":                     true, // GCP short name (search domain google.internal)
	"metadata.google.internal":     true,
	"metadata.goog":                true,
	"instance-data":                true, // AWS (EC2 classic resolvers)
	"instance-data.ec2.internal":   true,
	"metadata.azure.internal":      true,
	"metadata.packet.net":          true, // Equinix Metal
	"metadata.platformequinix.com": true,
	"metadata.tencentyun.com":      true,
}

// localhostNames are the loopback names of /etc/hosts files besides
// localhost and *.localhost (RFC 6761).
var localhostNames = map[string]bool{
	"localhost.localdomain": true,
	"ip6-localhost":         true,
	"ip6-loopback":          true,
}

// SpecialName reports whether h names something that is never a public
// destination whatever DNS answers: localhost, any name under .localhost,
// a loopback alias of /etc/hosts, or a cloud metadata service name. It
// returns the class the name stands for (Loopback or Metadata) and the
// addresses it stands for (for a policy that lets some non-public
// addresses through: AddressPolicy.Check each of them). IP literals are
// not names: Classify them.
func SpecialName(h Host) (Class, []netip.Addr, bool) {
	if h.IsIP() || h.IsZero() {
		return Public, nil, false
	}
	n := h.name
	switch {
	case n == "localhost" || strings.HasSuffix(n, ".localhost") || localhostNames[n]:
		return Loopback, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, true
	case metadataNames[n]:
		return Metadata, []netip.Addr{netip.MustParseAddr("169.254.169.254")}, true
	}
	return Public, nil, false
}

// CheckHost returns nil when h may be named as a destination under p: a
// public IP literal or an ordinary name (whose resolved addresses the
// dialer checks again), or a special one whose every address p allows.
// Otherwise it returns an *AddressError naming the address the host is or
// stands for and its class. Metadata names are refused whatever p says.
func (p AddressPolicy) CheckHost(h Host) error {
	if h.IsIP() {
		return p.Check(h.Addr())
	}
	c, addrs, ok := SpecialName(h)
	if !ok {
		return nil
	}
	if c == Metadata {
		return &AddressError{Addr: addrs[0], Class: Metadata}
	}
	for _, a := range addrs {
		if err := p.Check(a); err == nil {
			return nil // the dialer would reach it (an unsafe allowance)
		}
	}
	return &AddressError{Addr: addrs[0], Class: c}
}
