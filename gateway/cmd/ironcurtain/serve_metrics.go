package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers/fetch"
	"ironcurtain.dev/gateway/netpolicy"
)

// decisionMetrics wraps the audit sink so that every decision a door records
// is counted by rule, and every egress decision by the allowlist entry its
// host matches (metrics.Decisions; the dashboards' "decisions by rule" and
// "egress by domain", docs/observability.md). The domains named are the
// egress proxy's allowed_hosts and the fetch tool's allowed_domains.
func decisionMetrics(cfg *config.Config, reg prometheus.Registerer, sink audit.Sink) (audit.Sink, error) {
	var names []string
	seen := map[string]bool{}
	for _, list := range [][]string{cfg.Egress.AllowedHosts, cfg.Servers[fetch.ServerName].AllowedDomains} {
		for _, n := range list {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	allowed, err := netpolicy.ParsePatterns(names)
	if err != nil {
		return nil, fmt.Errorf("decision metrics: allowed hosts: %w", err)
	}
	d, err := metrics.NewDecisions(reg, allowed)
	if err != nil {
		return nil, err
	}
	return d.Sink(sink), nil
}
