package llmrelay

import (
	"net/http"
	"net/url"
	"strings"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// maxModelIDLen bounds the id in GET models/{id}.
const maxModelIDLen = 200

// endpoint is one relayed API path.
type endpoint struct {
	path    string // relative to the provider's base URL, no leading slash
	method  string
	metered bool // consumes tokens: usage is recorded and budgets apply
	// streamUsage: streaming requests get stream_options.include_usage so
	// the upstream reports usage at the end of the stream.
	streamUsage bool
}

// provider is one upstream model API (llmprovider.Upstream) and the paths
// the relay serves on it.
type provider struct {
	up    llmprovider.Upstream
	fixed map[string]endpoint
}

// newProvider returns the provider name under pc, serving eps.
func newProvider(name string, pc llmprovider.ProviderConfig, eps map[string]endpoint, getenv func(string) string) (*provider, error) {
	up, err := llmprovider.New(name, pc, getenv)
	if err != nil {
		return nil, err
	}
	return &provider{up: up, fixed: eps}, nil
}

var anthropicEndpoints = map[string]endpoint{
	"v1/messages":              {path: "v1/messages", method: http.MethodPost, metered: true},
	"v1/messages/count_tokens": {path: "v1/messages/count_tokens", method: http.MethodPost},
}

var openAIEndpoints = map[string]endpoint{
	"chat/completions": {path: "chat/completions", method: http.MethodPost, metered: true, streamUsage: true},
	"completions":      {path: "completions", method: http.MethodPost, metered: true, streamUsage: true},
	"responses":        {path: "responses", method: http.MethodPost, metered: true},
	"embeddings":       {path: "embeddings", method: http.MethodPost, metered: true},
	"models":           {path: "models", method: http.MethodGet},
}

// match finds the endpoint for rest (the decoded path after
// /llm/<provider>/). ok is false when the path is not relayed at all.
func (p *provider) match(rest string) (endpoint, bool) {
	if e, ok := p.fixed[rest]; ok {
		return e, true
	}
	if p.up.Provider == llmprovider.OpenAI {
		if id, ok := strings.CutPrefix(rest, "models/"); ok && validModelID(id) {
			return endpoint{path: "models/" + id, method: http.MethodGet}, true
		}
	}
	return endpoint{}, false
}

// validModelID accepts the model ids of OpenAI, fine-tunes
// ("ft:gpt-4o:org::id"), Ollama ("llama3.1:8b") and vLLM: one path segment
// of letters, digits and . _ : - that is not a dot segment.
func validModelID(id string) bool {
	if id == "" || len(id) > maxModelIDLen || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// upstreamURL is the base URL with e's path appended. Nothing of the agent's
// request but the allowlisted path and the query reaches it.
func (p *provider) upstreamURL(e endpoint, rawQuery string) *url.URL {
	u := *p.up.BaseURL
	u.Path = p.up.BaseURL.Path + "/" + e.path
	u.RawPath = ""
	u.RawQuery = rawQuery
	return &u
}

// forwardedHeaders are the only request headers passed upstream (besides
// the ones the relay sets itself). Credentials, cookies, hop-by-hop and
// forwarding headers never are.
var forwardedHeaders = []string{
	"Accept",
	"Anthropic-Version",
	"Anthropic-Beta",
	"Openai-Beta",
	"Idempotency-Key",
	"User-Agent",
}

// forwardedPrefix passes the SDKs' X-Stainless-* telemetry (language,
// retry count, timeout).
const forwardedPrefix = "X-Stainless-"

// outboundHeader builds the upstream request's header from the agent's:
// the allowlist above, then the provider's credential.
func (p *provider) outboundHeader(in http.Header, hasBody bool) http.Header {
	out := make(http.Header, len(forwardedHeaders)+4)
	for _, k := range forwardedHeaders {
		if v, ok := in[k]; ok {
			out[k] = v
		}
	}
	for k, v := range in {
		if strings.HasPrefix(k, forwardedPrefix) {
			out[k] = v
		}
	}
	if hasBody {
		out["Content-Type"] = []string{"application/json"}
	}
	if p.up.Provider == llmprovider.Anthropic && len(out["Anthropic-Version"]) == 0 {
		out["Anthropic-Version"] = []string{llmprovider.DefaultAnthropicVersion}
	}
	p.up.SetKey(out)
	return out
}

// droppedResponseHeaders never reach the agent: hop-by-hop headers, cookies
// and headers the relay recomputes.
var droppedResponseHeaders = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Set-Cookie":          true,
	"Alt-Svc":             true,
	"Location":            true,
}

// copyResponseHeader copies the upstream's response header to dst, minus
// the dropped ones, the ones Connection names, and any whose value contains
// the key.
func (p *provider) copyResponseHeader(dst, src http.Header) {
	var named []string
	for _, v := range src["Connection"] {
		for _, f := range strings.Split(v, ",") {
			named = append(named, http.CanonicalHeaderKey(strings.TrimSpace(f)))
		}
	}
outer:
	for k, vs := range src {
		if droppedResponseHeaders[k] {
			continue
		}
		for _, n := range named {
			if n == k {
				continue outer
			}
		}
		for _, v := range vs {
			if p.up.Key() != "" && strings.Contains(v, p.up.Key()) {
				continue outer
			}
		}
		dst[k] = vs
	}
}
