// Package egress is how the agent reaches the network: the Guard, which
// dials only checked addresses of allowed hosts (used by the proxy and by the
// fetch tool server), and the audited CONNECT/HTTP proxy the agent container
// uses as HTTPS_PROXY (built on elazarl/goproxy).
//
// Per request the proxy identifies the session (Proxy-Authorization carrying
// the agent token), decides on the canonical host and port before any DNS
// lookup (deployment allowlist, then session approvals, then optionally a
// human through the Escalator), resolves once, refuses any non-public
// address unless an Unsafe prefix allows it, dials the address it checked,
// optionally verifies that the TLS SNI names the CONNECT host, relays bytes
// with idle and connect timeouts and a per-session cap, and writes one
// audit.EgressEvent when the request or tunnel ends. Before anything is
// dialed, a CONNECT's host name and a plain-HTTP request's URL, headers and
// body are scanned for secrets (secrets.go): a finding is the policy's
// structural-secret-egress decision. See docs/egress.md.
package egress
