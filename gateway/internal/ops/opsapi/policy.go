package opsapi

import (
	"context"
	"net/http"

	"ironcurtain.dev/gateway/internal/livepolicy"
)

// PolicyReloader is the policy in force (*livepolicy.Policy).
type PolicyReloader interface {
	Reload(ctx context.Context, source string) (livepolicy.Result, error)
	Version() string
}

// CodePolicyInvalid answers a reload whose policy did not load: the old
// policy stays in force and the message says why.
const CodePolicyInvalid = "policy_invalid"

// PolicyStatus is the answer of GET /v1/policy.
type PolicyStatus struct {
	Version string `json:"version"`
}

// PolicyReloadAnswer is the answer of POST /v1/policy/reload: the reload's
// result, and on failure (422) the standard error naming the problem.
type PolicyReloadAnswer struct {
	Reload livepolicy.Result `json:"reload"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func (a *api) policyStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, PolicyStatus{Version: a.deps.Policy.Version()})
}

// reloadPolicy loads, validates and swaps the policy. The reload is not
// bound to the request's database deadline, nor cancelled when the client
// goes away mid-load: a half-done reload changes nothing anyway.
func (a *api) reloadPolicy(w http.ResponseWriter, r *http.Request) {
	operator, _ := r.Context().Value(operatorKey{}).(string)
	res, err := a.deps.Policy.Reload(context.WithoutCancel(r.Context()), "ops API by "+operator)
	ans := PolicyReloadAnswer{Reload: res}
	if err != nil {
		ans.Error = &struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}{CodePolicyInvalid, err.Error()}
		writeJSON(w, http.StatusUnprocessableEntity, ans)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// ReloadPolicy asks the gateway to reload its policy. A policy that does
// not load is an *APIError with Code CodePolicyInvalid naming the problem.
func (c *Client) ReloadPolicy(ctx context.Context) (livepolicy.Result, error) {
	var ans PolicyReloadAnswer
	err := c.do(ctx, http.MethodPost, "/v1/policy/reload", nil, nil, &ans)
	return ans.Reload, err
}

// PolicyVersion returns the version of the policy in force.
func (c *Client) PolicyVersion(ctx context.Context) (string, error) {
	var st PolicyStatus
	err := c.do(ctx, http.MethodGet, "/v1/policy", nil, nil, &st)
	return st.Version, err
}
