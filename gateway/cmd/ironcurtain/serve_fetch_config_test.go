package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/egress"
)

// fetchServersYAML is the servers section a test gateway.yaml needs when
// the test is not about the fetch allowlist (config.Parse requires it).
const fetchServersYAML = "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n"

type discardSink struct{}

func (discardSink) Record(context.Context, audit.Event) error { return nil }

// fetchAllowlistYAML renders a gateway.yaml whose fetch allowlist is list.
func fetchAllowlistYAML(list []string) []byte {
	quoted := make([]string, len(list))
	for i, d := range list {
		quoted[i] = strconv.Quote(d)
	}
	return []byte("servers:\n  fetch:\n    allowed_domains: [" + strings.Join(quoted, ", ") + "]\n")
}

// TestFetchAllowlistLoaderAgreesWithServe: serve builds the fetch server
// from servers.fetch.allowed_domains; every list config.Parse accepts must
// build, and every list buildFetch refuses must be refused by config.Parse
// (the loader every command uses), so `policy eval` never evaluates a
// config serve would refuse.
func TestFetchAllowlistLoaderAgreesWithServe(t *testing.T) {
	for _, list := range [][]string{
		nil, {}, {"*"}, {"example.com"}, {"*.example.com", "example.org"},
		{"github.com/o/r"}, {"example.com", "github.com/o/r"}, {"*."}, {""}, {"EXAMPLE.com"}, {"xn--bcher-kva.example"},
	} {
		t.Run(strings.Join(list, ","), func(t *testing.T) {
			checkFetchAgreement(t, list)
		})
	}
}

func FuzzFetchAllowlistLoaderAgreesWithServe(f *testing.F) {
	for _, s := range []string{"*", "example.com", "github.com/o/r", "*.", "a.*.com", "1.2.3.4", "[::1]", "ex ample.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, d string) {
		checkFetchAgreement(t, []string{d})
	})
}

func checkFetchAgreement(t *testing.T, list []string) {
	t.Helper()
	checkServeAccepts(t, fetchAllowlistYAML(list))
}

// checkServeAccepts: when config.Parse (the one loader of every command)
// accepts data, the builders serve runs on the configuration alone (no
// secret, no database, no network) accept it too.
func checkServeAccepts(t *testing.T, data []byte) {
	t.Helper()
	cfg, perr := config.Parse("/cfg/gateway.yaml", data)
	if perr != nil {
		return // refused by the loader: no command uses it
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := buildFetch(cfg, discardSink{}, log); err != nil {
		t.Fatalf("config.Parse accepted %q but serve's fetch server refuses it: %v", data, err)
	}
	if _, err := egress.ProxyConfigFrom(&cfg.Egress); err != nil {
		t.Fatalf("config.Parse accepted %q but serve's egress proxy refuses it: %v", data, err)
	}
	if _, err := decisionMetrics(cfg, prometheus.NewRegistry(), discardSink{}); err != nil {
		t.Fatalf("config.Parse accepted %q but serve's decision metrics refuse it: %v", data, err)
	}
	if _, err := doorSecrets(cfg); err != nil {
		t.Fatalf("config.Parse accepted %q but serve's secret scanning refuses it: %v", data, err)
	}
}

// FuzzConfigLoaderAgreesWithServe: whatever gateway.yaml config.Parse
// accepts, serve's configuration-only builders accept (seeded with the
// shipped configurations and sections near their bounds). The loop
// breaker is left out: its section validates itself in the loader
// (LoopBreakerConfig.Validate) and its builder needs the database.
func FuzzConfigLoaderAgreesWithServe(f *testing.F) {
	for _, rel := range []string{"images/gateway/gateway.yaml", "compose/gateway.yaml", "compose/cloudrun/gateway.yaml", "compose/kubernetes/base/gateway.yaml"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "..", rel)); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"egress:\n  allowed_hosts: [\"*.example.com\"]\n  allowed_ports: [443, 8443]\n",
		"secrets:\n  kinds: [aws]\n",
		"egress:\n  unsafe_allow_addresses: [10.0.0.0/8]\n",
	} {
		f.Add([]byte(s + fetchServersYAML))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkServeAccepts(t, data)
	})
}
