// Package egress is how the agent reaches the network: the audited
// CONNECT/HTTP proxy the agent container uses as HTTPS_PROXY (built on
// elazarl/goproxy). It dials through netguard.Guard, which dials only checked
// addresses of allowed hosts (and which the fetch tool server and url: MCP
// servers share).
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
//
// The proxy is a door that does not hand its requests to the gate's call
// pipeline (gate.Gate.Do): a request is not a tool call. It is decided per
// connection, before anything is dialed, by the deployment's host allowlist,
// the session's approvals and the secret scan, not by a tool's policy
// rules. Its record is one egress row per request or tunnel, written when it
// ends, built by audit.NewEgressEvent and written through gate.Recorder
// (whose failure pauses new egress); there is no write-ahead decision row,
// because nothing runs before the decision and the row then says what ran.
// Its escalations ask about a host, not a call: for an unlisted host
// (decide.go: escalate), concurrent requests for the same session, host and
// port share one question and an approval holds for that session, host and
// port for the life of the proxy; for a request carrying a secret
// (secrets.go: decideSecrets) the approval covers that request only. Neither
// writes a decision row before asking, attaches to an identical retry's
// escalation or tells a client about progress, so neither uses the gate's
// escalation wait (which does all three, per tool call).
package egress
