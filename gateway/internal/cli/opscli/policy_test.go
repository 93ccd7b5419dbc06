package opscli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/livepolicy"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

func TestPolicyReload(t *testing.T) {
	const token = "operator-token-0123456789abcdef"
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/policy/reload" || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		ans := opsapi.PolicyReloadAnswer{Reload: livepolicy.Result{Result: livepolicy.ResultChanged, Version: "bbbbbbbbbbbbbbbb", Previous: "aaaaaaaaaaaaaaaa", Rules: 3, Tools: 2}}
		if fail {
			w.WriteHeader(http.StatusUnprocessableEntity)
			ans.Reload = livepolicy.Result{Result: livepolicy.ResultFailed, Version: "aaaaaaaaaaaaaaaa"}
			ans.Error = &struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}{opsapi.CodePolicyInvalid, "reloading policy: compiled-policy.json: rules[0].then: missing"}
		}
		_ = json.NewEncoder(w).Encode(ans)
	}))
	defer srv.Close()
	env := func(out, errOut *bytes.Buffer) Env {
		return Env{Getenv: func(k string) string {
			switch k {
			case EnvOperatorToken:
				return token
			case EnvOpsURL:
				return srv.URL
			}
			return ""
		}, Stdout: out, Stderr: errOut}
	}
	var out, errOut bytes.Buffer
	if code := PolicyReload(context.Background(), nil, env(&out, &errOut)); code != 0 || !strings.Contains(out.String(), "policy changed: version bbbbbbbbbbbbbbbb (was aaaaaaaaaaaaaaaa)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	fail = true
	out.Reset()
	errOut.Reset()
	if code := PolicyReload(context.Background(), nil, env(&out, &errOut)); code != 1 || !strings.Contains(errOut.String(), "rules[0].then: missing") {
		t.Fatalf("exit %d, stderr %q: want 1 and the problem named", code, errOut.String())
	}
	if code := PolicyReload(context.Background(), []string{"extra"}, env(&out, &errOut)); code != 2 {
		t.Fatalf("exit %d for an extra argument, want 2", code)
	}
}
