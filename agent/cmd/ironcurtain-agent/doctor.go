package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"ironcurtain.dev/agent/internal/doctor"
	"ironcurtain.dev/agent/mcpclient"
)

func runDoctor(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	mcpURL := fs.String("mcp-url", e.getenv(envMCPURL), "gateway MCP endpoint (env "+envMCPURL+")")
	proxy := fs.String("proxy", firstNonEmpty(e.getenv("HTTPS_PROXY"), e.getenv("https_proxy"), e.getenv("HTTP_PROXY"), e.getenv("http_proxy")), "egress proxy URL (default from HTTPS_PROXY/HTTP_PROXY)")
	direct := fs.String("direct", strings.Join(doctor.DefaultDirectTargets, ","), "comma-separated public host:port that must NOT be reachable directly")
	dnsName := fs.String("dns-name", doctor.DefaultDNSName, "public name that must not resolve to anything reachable")
	unlisted := fs.String("unlisted-host", doctor.DefaultUnlistedHost, "host:port the proxy must refuse")
	allowed := fs.String("allowed-host", "", "optional host:port the proxy must allow")
	timeout := fs.Duration("timeout", doctor.DefaultTimeout, "timeout of each network probe")
	if err := fs.Parse(e.args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	token := e.getenv(envToken)
	cfg := doctor.Config{
		Environ:       e.environ(),
		Home:          e.getenv("HOME"),
		ProxyURL:      *proxy,
		DirectTargets: splitList(*direct),
		DNSName:       *dnsName,
		UnlistedHost:  *unlisted,
		AllowedHost:   *allowed,
		Timeout:       *timeout,
	}
	if *mcpURL != "" {
		cfg.CheckMCP = func(ctx context.Context) (int, error) {
			c, err := mcpclient.Connect(ctx, mcpclient.Config{URL: *mcpURL, Token: token})
			if err != nil {
				return 0, err
			}
			defer c.Close()
			tools, err := c.Tools(ctx)
			return len(tools), err
		}
	}
	start := time.Now()
	failed := doctor.Print(e.stdout, doctor.Run(ctx, cfg))
	if failed > 0 {
		fmt.Fprintf(e.stdout, "%d check(s) failed (%s)\n", failed, time.Since(start).Round(time.Millisecond))
		return exitFailed
	}
	fmt.Fprintf(e.stdout, "all checks passed (%s)\n", time.Since(start).Round(time.Millisecond))
	return exitOK
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
