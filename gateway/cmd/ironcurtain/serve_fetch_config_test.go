package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/config"
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
	cfg, perr := config.Parse("/cfg/gateway.yaml", fetchAllowlistYAML(list))
	if perr != nil {
		return // refused by the loader: no command uses it
	}
	if _, err := buildFetch(cfg, discardSink{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("config.Parse accepted fetch allowlist %q but serve refuses it: %v", list, err)
	}
}
