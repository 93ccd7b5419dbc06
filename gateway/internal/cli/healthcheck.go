package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"ironcurtain.dev/gateway/config"
)

// pid1Cmdline is where the healthcheck finds the configuration the
// container's main process runs with (a variable for tests).
var pid1Cmdline = "/proc/1/cmdline"

// runHealthcheck is the container healthcheck (images/gateway/Dockerfile):
// the image has no curl, so the gateway probes itself.
func runHealthcheck(ctx context.Context, e Env) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	cfgPath := fs.String("config", "", "gateway.yaml of the gateway to probe (default: the --config of `ironcurtain serve` running as PID 1, else "+DefaultConfigPath+")")
	timeout := fs.Duration("timeout", 4*time.Second, "time for all probes together")
	liveOnly := fs.Bool("live", false, "check only that the listeners answer (/healthz), not that Postgres is reachable (/readyz)")
	if err := fs.Parse(e.Args); err != nil {
		return 2
	}
	path := *cfgPath
	if path == "" {
		path = serveConfigPath(pid1Cmdline)
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintf(e.Stderr, "ironcurtain healthcheck: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	opsPath := "/readyz"
	if *liveOnly {
		opsPath = "/healthz"
	}
	probes := []struct{ name, url string }{
		{"agent API", "http://" + probeAddr(cfg.Agent.ListenAddr()) + "/healthz"},
		{"ops API", "http://" + probeAddr(cfg.Ops.ListenAddr()) + opsPath},
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	failed := false
	for _, p := range probes {
		if err := probe(ctx, client, p.url); err != nil {
			fmt.Fprintf(e.Stdout, "FAIL %s %s: %v\n", p.name, p.url, err)
			failed = true
			continue
		}
		fmt.Fprintf(e.Stdout, "ok   %s %s\n", p.name, p.url)
	}
	if failed {
		return 1
	}
	return 0
}

// probe GETs url and wants a 200.
func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("requesting: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// probeAddr turns a listen address into one to dial from inside the same
// container: a wildcard or empty host becomes loopback, a named host (a
// network alias such as gateway-ops) is kept.
func probeAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

// serveConfigPath returns the --config of `ironcurtain serve` when that is
// the process whose NUL-separated command line is in file, else the
// default path. A healthcheck runs next to the server it checks (docker
// exec in the same container), so this finds the configuration the server
// really uses, whatever the container was started with.
func serveConfigPath(file string) string {
	raw, err := os.ReadFile(file)
	if err != nil {
		return DefaultConfigPath
	}
	args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
	if p, err := configFromArgs(args); err == nil {
		return p
	}
	return DefaultConfigPath
}

var errNotServe = errors.New("not an ironcurtain serve command line")

// configFromArgs finds the --config value in a `ironcurtain serve` command
// line (the program may be a path, and may follow an init such as
// `docker-init --`), or the default when serve has none.
func configFromArgs(args []string) (string, error) {
	start := -1
	for i := 0; i+1 < len(args); i++ {
		if (args[i] == "ironcurtain" || strings.HasSuffix(args[i], "/ironcurtain")) && args[i+1] == "serve" {
			start = i + 2
			break
		}
	}
	if start < 0 {
		return "", errNotServe
	}
	rest := args[start:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		for _, name := range []string{"-config", "--config"} {
			if a == name && i+1 < len(rest) {
				return rest[i+1], nil
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v, nil
			}
		}
	}
	return DefaultConfigPath, nil
}
