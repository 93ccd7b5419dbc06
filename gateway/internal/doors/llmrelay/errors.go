package llmrelay

import (
	"encoding/json"
	"net/http"
	"strconv"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// refusal is an answer the relay gives itself, without the upstream. Its
// message reaches the agent and must be short and safe; detail goes to the
// audit record and the log only.
type refusal struct {
	status int
	kind   errKind
	msg    string // for the agent
	reason string // metric label: a fixed set
	// noRetry sets x-should-retry: false so the SDKs do not retry.
	noRetry bool
}

// errKind is the error class, mapped to each provider's type names.
type errKind int

const (
	kindInvalid errKind = iota
	kindAuth
	kindPermission
	kindNotFound
	kindMethod
	kindTooLarge
	kindRateLimit
	kindBudget
	kindUnavailable
	kindUpstream
	kindTimeout
)

// anthropicType maps an errKind to the Anthropic error "type".
func (k errKind) anthropicType() string {
	switch k {
	case kindAuth:
		return "authentication_error"
	case kindPermission, kindBudget:
		return "permission_error"
	case kindNotFound, kindMethod:
		return "not_found_error"
	case kindTooLarge:
		return "request_too_large"
	case kindRateLimit:
		return "rate_limit_error"
	case kindUnavailable, kindUpstream, kindTimeout:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}

// openAI maps an errKind to the OpenAI error "type" and "code".
func (k errKind) openAI() (typ, code string) {
	switch k {
	case kindAuth:
		return "invalid_request_error", "invalid_api_key"
	case kindPermission:
		return "invalid_request_error", "permission_denied"
	case kindBudget:
		return "insufficient_quota", "budget_exceeded"
	case kindNotFound:
		return "invalid_request_error", "unknown_url"
	case kindMethod:
		return "invalid_request_error", "method_not_allowed"
	case kindTooLarge:
		return "invalid_request_error", "request_too_large"
	case kindRateLimit:
		return "rate_limit_error", "rate_limit_exceeded"
	case kindUnavailable:
		return "server_error", "service_unavailable"
	case kindUpstream:
		return "server_error", "bad_gateway"
	case kindTimeout:
		return "server_error", "timeout"
	default:
		return "invalid_request_error", "invalid_request"
	}
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// writeRefusal answers in the provider's error shape (a generic OpenAI-like
// shape when the provider is unknown).
func writeRefusal(w http.ResponseWriter, providerName string, rf *refusal) {
	var body []byte
	switch providerName {
	case llmprovider.Anthropic:
		var e anthropicError
		e.Type = "error"
		e.Error.Type = rf.kind.anthropicType()
		e.Error.Message = rf.msg
		body, _ = json.Marshal(e)
	default:
		var e openAIError
		e.Error.Type, e.Error.Code = rf.kind.openAI()
		e.Error.Message = rf.msg
		body, _ = json.Marshal(e)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	if rf.noRetry {
		h.Set("X-Should-Retry", "false")
	}
	if rf.status == http.StatusMethodNotAllowed {
		h.Set("Allow", "GET, POST")
	}
	w.WriteHeader(rf.status)
	_, _ = w.Write(body)
}
