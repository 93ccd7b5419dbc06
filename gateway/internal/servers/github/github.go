// Package github is the gateway's built-in "github" tool server: pull
// requests (pr_create, pr_view, pr_list, pr_comment, pr_edit, pr_close) and
// issues (issue_view, issue_comment) through the GitHub REST API with the
// gateway's own token.
//
// The agent never holds the token: it lives in the gateway (environment or
// secret file), is sent only to the configured API base URL and never
// appears in a result or a log line. There is no merge tool, so no call can
// merge a pull request. pr_edit and pr_close act only on pull requests the
// gateway's own account opened: the account's login is fetched from the API
// once and cached, and each edit first reads the pull request's author.
//
// owner and repo are checked against GitHub's name rules before they are
// placed in a request path, so that no argument can reach another endpoint.
package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v88/github"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/servers"
)

// ServerName is the name the hub exposes the tools under ("github__...").
const ServerName = "github"

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultAPIURL  = "https://api.github.com/"
	DefaultTimeout = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	// APIURL is the REST API base URL (GitHub Enterprise:
	// https://host/api/v3/). Default DefaultAPIURL.
	APIURL string
	// Token authenticates the gateway's account. It is required to call the
	// API; a server without one answers every call with a clear error.
	Token string
	// Timeout bounds one API request. Default DefaultTimeout.
	Timeout time.Duration
	// Logger receives failure detail (never the token). Nil discards.
	Logger *slog.Logger
	// HTTPClient replaces the default client (tests); its Timeout is kept.
	// Its transport is wrapped so that every request is recorded.
	HTTPClient *http.Client
	// Sink receives one egress row per API request, linked to the call
	// (servers.NewEgressEvent). Without it every request is refused.
	Sink audit.Sink
}

// Server is the github tool server.
type Server struct {
	client *gh.Client
	token  string
	log    *slog.Logger

	mu       sync.Mutex
	identity string // the gateway account's login, once known
}

var _ servers.Server = (*Server)(nil)

// New returns a Server. It makes no request: the account's identity is
// fetched on the first pr_edit or pr_close.
func New(cfg Config) (*Server, error) {
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("creating github server: negative timeout")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if strings.ContainsAny(cfg.Token, " \t\r\n") {
		return nil, errors.New("creating github server: the token contains whitespace (check the secret file)")
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("creating github server: api url %q must be an absolute http(s) URL without credentials", cfg.APIURL)
	}
	apiBase := cfg.APIURL
	if !strings.HasSuffix(apiBase, "/") {
		apiBase += "/"
	}
	var hc *http.Client
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	} else {
		hc = &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second}}
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &egressTransport{base: base, sink: cfg.Sink}
	opts := []gh.ClientOptionsFunc{
		gh.WithHTTPClient(hc),
		gh.WithURLs(&apiBase, &apiBase),
		gh.WithUserAgent("ironcurtain-gateway"),
	}
	if cfg.Token != "" {
		opts = append(opts, gh.WithAuthToken(cfg.Token))
	}
	c, err := gh.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating github server: api url: %w", err)
	}
	s := &Server{client: c, token: cfg.Token, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Name implements servers.Server.
func (s *Server) Name() string { return ServerName }

// Tools implements servers.Server.
func (s *Server) Tools() []servers.Tool { return Tools() }

// Call implements servers.Server.
func (s *Server) Call(ctx context.Context, tool string, args map[string]any) (servers.Result, error) {
	def, ok := toolsByName[tool]
	if !ok {
		return servers.ToolError("unknown tool " + tool), nil
	}
	a, err := parseArgs(def, args)
	if err != nil {
		return servers.ToolError(err.Error()), nil
	}
	if s.token == "" {
		return servers.ToolError("the gateway has no GitHub token configured (GITHUB_TOKEN); ask the operator"), nil
	}
	res, err := def.run(s, ctx, a)
	if err != nil {
		var ae *agentError
		if errors.As(err, &ae) {
			return servers.ToolError(s.redact(ae.msg)), nil
		}
		s.log.Warn("github call failed", "tool", tool, "err", s.redact(err.Error()))
		return servers.ToolError(s.redact(apiMessage(tool, err))), nil
	}
	return servers.Text(s.redact(res)), nil
}

// identityLogin returns the login of the gateway's account, asking the API
// once; a failure is not cached.
func (s *Server) identityLogin(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.identity != "" {
		return s.identity, nil
	}
	u, _, err := s.client.Users.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("fetching the gateway's GitHub identity: %w", err)
	}
	if u.GetLogin() == "" {
		return "", errors.New("fetching the gateway's GitHub identity: empty login")
	}
	s.identity = u.GetLogin()
	return s.identity, nil
}

// requireOwnPR refuses unless pull request n was opened by the gateway's
// account.
func (s *Server) requireOwnPR(ctx context.Context, a args, verb string) error {
	me, err := s.identityLogin(ctx)
	if err != nil {
		return err
	}
	pr, _, err := s.client.PullRequests.Get(ctx, a.owner, a.repo, a.number)
	if err != nil {
		return err
	}
	author := pr.GetUser().GetLogin()
	if author == "" || !strings.EqualFold(author, me) {
		return &agentError{msg: fmt.Sprintf("%s refused: pull request #%d in %s/%s was opened by %q, not by the gateway's account; the gateway only %s its own pull requests",
			verb, a.number, a.owner, a.repo, author, verbPast(verb))}
	}
	return nil
}

func verbPast(verb string) string {
	switch verb {
	case "pr_close":
		return "closes"
	default:
		return "edits"
	}
}

// redact removes the token from any text that could reach the agent or a log.
func (s *Server) redact(msg string) string {
	if s.token == "" || !strings.Contains(msg, s.token) {
		return msg
	}
	return strings.ReplaceAll(msg, s.token, "[redacted]")
}

// agentError is a refusal whose message is meant for the agent.
type agentError struct{ msg string }

func (e *agentError) Error() string { return e.msg }

// apiMessage turns an API failure into a short message for the agent.
func apiMessage(tool string, err error) string {
	var er *gh.ErrorResponse
	var rl *gh.RateLimitError
	var arl *gh.AbuseRateLimitError
	switch {
	case errors.Is(err, errNotRecorded):
		return tool + " failed: the gateway could not record its request to GitHub (audit unavailable); ask the operator"
	case errors.As(err, &rl), errors.As(err, &arl):
		return tool + " failed: GitHub rate limit reached; try again later"
	case errors.As(err, &er):
		code := 0
		if er.Response != nil {
			code = er.Response.StatusCode
		}
		detail := cut(er.Message, 300)
		for i, e := range er.Errors {
			if i == 3 {
				break
			}
			if e.Message != "" {
				detail += "; " + cut(e.Message, 200)
			} else if e.Code != "" {
				detail += "; " + cut(e.Field+" "+e.Code, 200)
			}
		}
		switch code {
		case http.StatusUnauthorized:
			return tool + " failed: GitHub refused the gateway's credentials"
		case http.StatusNotFound:
			return tool + " failed: not found (or the gateway's account cannot see it)"
		case http.StatusForbidden:
			return tool + " failed: forbidden by GitHub: " + detail
		default:
			return fmt.Sprintf("%s failed: GitHub answered %d: %s", tool, code, detail)
		}
	case errors.Is(err, context.DeadlineExceeded):
		return tool + " failed: GitHub did not answer in time"
	default:
		return tool + " failed: could not reach GitHub"
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s[:n])
	if len(r) > 0 && r[len(r)-1] == '\uFFFD' {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

// OwnPR returns nil when pull request number of owner/repo was opened by
// the gateway's account (the record the gateway keeps of the pull requests
// it opened, through the tools or the GitHub relay alike), and an error
// otherwise (not its own, or the API could not say). tool ("pr_edit" or
// "pr_close") names the action in the refusal. The error's text is safe
// to show the agent.
func (s *Server) OwnPR(ctx context.Context, tool, owner, repo string, number int) error {
	if s.token == "" {
		return errors.New("the gateway has no GitHub token configured")
	}
	if tool != "pr_close" {
		tool = "pr_edit"
	}
	err := s.requireOwnPR(ctx, args{owner: owner, repo: repo, number: number}, tool)
	var ae *agentError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return errors.New(s.redact(ae.msg))
	default:
		s.log.Warn("github ownership check failed", "err", s.redact(err.Error()))
		return errors.New(s.redact(apiMessage("the ownership check", err)))
	}
}
