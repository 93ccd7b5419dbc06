package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

// TestServePolicyReload: the ops API of a running gateway names the policy
// version, reloads it on POST /v1/policy/reload (operator token only) and
// exports ironcurtain_policy_info and the reload counter.
func TestServePolicyReload(t *testing.T) {
	g := startGateway(t)
	do := func(method, path, token string) (int, string) {
		t.Helper()
		return opsDo(t, g.ops, method, path, token)
	}
	if code, _ := do(http.MethodPost, "/v1/policy/reload", testAgentToken); code != http.StatusUnauthorized {
		t.Fatalf("reload with the agent token: %d, want 401", code)
	}
	code, body := do(http.MethodGet, "/v1/policy", testOperatorToken)
	var st opsapi.PolicyStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || len(st.Version) != 16 {
		t.Fatalf("GET /v1/policy: %d %s", code, body)
	}
	code, body = do(http.MethodPost, "/v1/policy/reload", testOperatorToken)
	var ans opsapi.PolicyReloadAnswer
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ans) != nil || ans.Reload.Result != "unchanged" || ans.Reload.Version != st.Version {
		t.Fatalf("reload: %d %s", code, body)
	}
	_, metrics := do(http.MethodGet, "/metrics", testOperatorToken)
	for _, want := range []string{
		`ironcurtain_policy_info{version="` + st.Version + `"} 1`,
		`ironcurtain_policy_reloads_total{result="unchanged"} 1`,
		`ironcurtain_policy_reloads_total{result="failed"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
