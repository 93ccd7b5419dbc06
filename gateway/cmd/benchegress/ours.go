package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/egress"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/netpolicy"
)

// benchToken is the agent token of the benchmark's one session.
const benchToken = "bench-egress-token-0123456789abcdef"

// oursCaps are the connection caps of our proxy in the benchmark: high
// enough for 5,000 idle tunnels from one client (an operator raises them
// the same way in gateway.yaml; the defaults are 1,024 connections, 256 per
// client and 64 tunnels per session).
const oursCaps = 20000

// serveOurs runs IronCurtain's egress proxy (the production egress.Proxy
// with its guard, authentication, caps and one audit row per tunnel,
// written to a JSON-lines audit sink as with gateway.yaml audit.jsonl_file)
// on listen, allowing only 127.0.0.1:port, until SIGTERM or SIGINT. It
// prints "ready <addr>" once it accepts.
func serveOurs(listen string, port int, auditPath string) error {
	auth, err := session.NewStatic(map[string]string{"bench": benchToken})
	if err != nil {
		return err
	}
	sink, err := audit.OpenJSONL(auditPath)
	if err != nil {
		return err
	}
	defer sink.Close()
	cfg := egress.ProxyConfig{
		Allow:                   netpolicy.MustParsePatterns("127.0.0.1"),
		AllowedPorts:            []int{port},
		Addresses:               netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		UnsafeSkipSNICheck:      true, // raw TCP tunnels, as for smokescreen and Squid
		MaxTunnelsPerSession:    oursCaps,
		MaxConnections:          oursCaps,
		MaxConnectionsPerClient: oursCaps,
		IdleTimeout:             10 * time.Minute,
		DrainTimeout:            time.Second,
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := egress.NewProxy(cfg, egress.Deps{Auth: auth, Sink: sink, Registerer: prometheus.NewRegistry(), Logger: log})
	if err != nil {
		return err
	}
	lc := egress.ListenConfig()
	ln, err := lc.Listen(context.Background(), "tcp", listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Printf("ready %s\n", ln.Addr())
	if err := p.Serve(ctx, ln); err != nil {
		return err
	}
	return nil
}
