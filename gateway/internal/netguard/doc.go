// Package netguard is the Guard: the one way the gateway dials a host on
// behalf of the agent or a tool server. It decides on the host name before
// any DNS lookup (allowlist, and the address policy for an IP literal),
// resolves once, checks every resolved address against the address policy,
// and connects only to an address it checked, with a socket-level check
// before connect as the last line of defence.
//
// It is a leaf below the doors and the servers: the egress proxy, the fetch
// tool server and remote (url:) MCP servers all dial through it, and it
// imports nothing of the gateway but netpolicy. Its test double for DNS is
// in netguardtest.
package netguard
