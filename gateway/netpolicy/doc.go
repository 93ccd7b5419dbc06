// Package netpolicy is the one place where the gateway turns untrusted host
// names, authorities and URLs into canonical values and decides whether a host
// or an IP address may be reached.
//
// It is pure: no sockets, no DNS. The egress proxy, the fetch tool server and
// the policy engine all parse through it so that they can never disagree about
// which host a string names.
//
// The parsers are strict on purpose. Anything another parser (a browser, curl,
// Go's net/url, glibc's inet_aton) could read differently is rejected rather
// than guessed at: backslashes, control characters and whitespace, percent
// escapes in the host, userinfo, IPv6 zones, ports outside 1..65535 or with
// signs or leading zeros. Host names are mapped with IDNA UTS #46
// (non-transitional, STD3 rules), lower-cased, and may end in at most one
// trailing dot, which is removed. The result is then checked again for every
// IPv4 notation a resolver accepts (decimal 2130706433, hex 0x7f000001, octal
// 0177.0.0.1, short 127.1), so that such a host is always an IP, never a name.
//
// Classify puts an address in its IANA special-purpose classes; IPv6 addresses
// that embed an IPv4 address (mapped, compatible, 6to4, NAT64, Teredo) carry
// the classes of both. AddressPolicy denies every non-public address unless an
// Unsafe prefix allows it.
package netpolicy
