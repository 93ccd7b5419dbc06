package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

// Without a database the ops listener serves /healthz and /metrics only;
// /metrics takes an operator or a metrics token, as with a database.
func TestBuildOpsWithoutDatabaseMetricsAuth(t *testing.T) {
	ops, err := opsapi.NewOperators(map[string]opsapi.OperatorToken{"operator": testOperatorToken})
	if err != nil {
		t.Fatal(err)
	}
	scrapers, err := opsapi.NewScrapers(map[string]opsapi.OperatorToken{"metrics": testMetricsToken})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "ironcurtain_test_total", Help: "a test counter"}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name     string
		scrapers *opsapi.Operators
		path     string
		token    string
		want     int
	}{
		{"operator token", scrapers, "/metrics", testOperatorToken, http.StatusOK},
		{"metrics token", scrapers, "/metrics", testMetricsToken, http.StatusOK},
		{"metrics token, none configured", nil, "/metrics", testMetricsToken, http.StatusUnauthorized},
		{"agent token", scrapers, "/metrics", testAgentToken, http.StatusUnauthorized},
		{"no token", scrapers, "/metrics", "", http.StatusUnauthorized},
		{"metrics token elsewhere", scrapers, "/v1/escalations", testMetricsToken, http.StatusNotFound},
		{"health without a token", scrapers, "/healthz", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := buildOps(&storage{}, ops, tt.scrapers, nil, reg, log)
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %.200s", rec.Code, tt.want, rec.Body)
			}
			if tt.path == "/metrics" && tt.want == http.StatusOK && !strings.Contains(rec.Body.String(), "ironcurtain_test_total") {
				t.Fatalf("/metrics body lacks the registry's metric: %.200s", rec.Body)
			}
		})
	}
}
