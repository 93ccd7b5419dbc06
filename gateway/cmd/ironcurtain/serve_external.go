package main

import (
	"context"
	"fmt"
	"log/slog"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/servers/external"
	"ironcurtain.dev/gateway/netpolicy"
)

// externalTransport returns the transport of external server name: for a
// url: server, streamable HTTP dialed through its own egress Guard (the
// allowlist is servers.<name>.allowed_hosts or the URL's host; the address
// rules are the proxy's), recording every request in sink. For a command:
// server it returns nil (external.Start runs the child) and logs, once, what
// such a child can still see; for an image: server it returns nil.
func externalTransport(cfg *config.Config, name string, sink audit.Sink, getenv func(string) string, log *slog.Logger) (external.Transport, error) {
	sc := cfg.Servers[name]
	if sc.URL == "" {
		if sc.Command == "" {
			return nil, nil // image: the launcher runs it (withLauncher)
		}
		log.Warn("external server runs as a child process of the gateway (command:): it runs as the gateway's user, "+
			"with a scrubbed environment but the gateway's filesystem view, network and loopback ports (the ops port still needs an operator token); "+
			"use it only for binaries you vetted, prefer url: or image:",
			"server", name, "command", sc.Command)
		return nil, nil
	}
	u, err := sc.RemoteURL()
	if err != nil {
		return nil, fmt.Errorf("servers.%s.url: %w", name, err)
	}
	allow, err := sc.RemoteAllowedHosts()
	if err != nil {
		return nil, fmt.Errorf("servers.%s.allowed_hosts: %w", name, err)
	}
	prefixes, err := cfg.Egress.UnsafePrefixes()
	if err != nil {
		return nil, err
	}
	own, err := sc.RemoteUnsafePrefixes()
	if err != nil {
		return nil, fmt.Errorf("servers.%s.%w", name, err)
	}
	for _, p := range own {
		log.Warn("unsafe setting is on: a url: server may be dialed at a private address", "setting", "servers."+name+".unsafe_allow_addresses", "prefix", p.String())
	}
	prefixes = append(prefixes, own...)
	guard, err := netguard.NewGuard(netguard.GuardConfig{Allow: allow, Addresses: netpolicy.AddressPolicy{UnsafeAllow: prefixes}})
	if err != nil {
		return nil, fmt.Errorf("servers.%s: egress guard: %w", name, err)
	}
	headers, err := sc.RemoteHeaders(name, getenv)
	if err != nil {
		return nil, err
	}
	tr, err := external.NewHTTPTransport(external.HTTPConfig{Name: name, URL: u, Headers: headers},
		external.HTTPDeps{Dialer: guard, Sink: sink, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("servers.%s: %w", name, err)
	}
	log.Info("external server reached over streamable HTTP (url:)", "server", name, "host", u.Host.String(), "allowed_hosts", len(allow))
	return tr, nil
}

// logSink hands the egress events of a one-off command (tools pin, run by
// the operator, with no audit database behind it) to a logger.
type logSink struct{ log *slog.Logger }

func (s logSink) Record(_ context.Context, e audit.Event) error {
	if ev, ok := e.(*audit.EgressEvent); ok {
		s.log.Info("egress", "kind", ev.Kind, "method", ev.Method, "host", ev.Host, "port", ev.Port, "decision", ev.Decision, "error", ev.Error)
	}
	return nil
}

// warnExposedSecrets logs one warning per configured secret file that its
// group or others may read or write (config.ExposedSecretFiles says why
// these are warned about, not refused).
func warnExposedSecrets(cfg *config.Config, log *slog.Logger) {
	for _, x := range cfg.ExposedSecretFiles() {
		log.Warn("secret file is readable or writable by group or others; chmod 600 it (or mount it 0400 for the gateway's uid)",
			"field", x.Field, "path", x.Path, "mode", fmt.Sprintf("%#o", x.Mode))
	}
}
