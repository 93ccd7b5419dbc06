// Package githubrelay classifies requests an agent sends to the GitHub API
// through the gateway (REST and GraphQL) into the actions the github tools'
// policy governs: which repository, which action (view, list, create a pull
// request, comment, edit, close), and which requests are never allowed
// (merge in any form, repository administration, tokens, secrets,
// workflows, deletions, unknown routes and unknown GraphQL mutations).
//
// Classification is strict and works on a canonical form: the path is
// percent-decoded once, encoded separators, dot segments, control
// characters and non-ASCII are refused, literal segments are matched
// case-insensitively against route templates (never by prefix), and the
// canonical path is what the relay forwards. GraphQL documents are parsed
// with a real parser; every operation in a document is classified, and a
// mutation's root fields are found through aliases, inline fragments and
// fragment spreads.
//
// Handler (relay.go) is the relay on the agent port (/github/, and gh's
// layouts): it authenticates the agent token, makes each request one
// decision of the github tool it amounts to through the hub's pipeline
// (gate.Gate.Do: policy, escalation, write-ahead record), with the
// tool's arguments (decide.go; a GraphQL mutation's node id resolved to
// owner/repo/number with the gateway's token first; edit and close only on
// pull requests the gateway's account opened), and forwards an allowed
// request with the gateway's GitHub token, streaming the answer back. See
// docs/github-relay.md.
package githubrelay

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Action is what a request does, in the terms of the github tools.
type Action string

// Actions. Tool names are the github server's tools; the others have no
// tool and are decided here or by the relay.
const (
	ActionRead         Action = "read" // a GET the policy decides as a read of owner/repo
	ActionPRCreate     Action = "pr_create"
	ActionPRView       Action = "pr_view"
	ActionPRList       Action = "pr_list"
	ActionPRComment    Action = "pr_comment"
	ActionPREdit       Action = "pr_edit"
	ActionPRClose      Action = "pr_close"
	ActionIssueView    Action = "issue_view"
	ActionIssueComment Action = "issue_comment"
	ActionMerge        Action = "merge"     // never allowed
	ActionForbidden    Action = "forbidden" // administration, secrets, deletions…: never allowed
	ActionGraphQL      Action = "graphql"   // classified further by ClassifyGraphQL
)

// Route is a classified REST request.
type Route struct {
	// Template is the matched route template, e.g. "/repos/{owner}/{repo}/pulls/{number}".
	Template string
	// Path is the canonical path to forward.
	Path string
	// Query is the canonical query string to forward (canonicalQuery):
	// the parameters as decided, re-encoded, sorted by name.
	Query  string
	Action Action
	// Owner and Repo are lower-cased (GitHub compares them case-insensitively);
	// Number is the pull request or issue number, 0 when none.
	Owner, Repo string
	Number      int
	// Why says why a forbidden or merge request is refused.
	Why string
}

// ErrRequest is wrapped by every refusal of a request that cannot be
// classified safely.
var ErrRequest = errors.New("github request refused")

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRequest, fmt.Sprintf(format, a...))
}

// methodOverrides are headers some servers read as the real method.
var methodOverrides = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// route is one template: literal segments and {owner}, {repo}, {number},
// {any} placeholders.
type route struct {
	method   string
	template string
	action   Action
	why      string
	segs     []string
}

func r(method, template string, action Action, why ...string) route {
	rt := route{method: method, template: template, action: action, segs: strings.Split(strings.TrimPrefix(template, "/"), "/")}
	if len(why) > 0 {
		rt.why = why[0]
	}
	return rt
}

const (
	whyMerge  = "merging is not possible through the gateway"
	whyAdmin  = "repository administration is not possible through the gateway"
	whyDelete = "deleting through the GitHub API is not possible through the gateway"
)

// routes are matched in order; the first whose method and segments match
// wins. Anything unmatched is refused.
var routes = []route{
	r("PUT", "/repos/{owner}/{repo}/pulls/{number}/merge", ActionMerge, whyMerge),
	r("GET", "/repos/{owner}/{repo}/pulls/{number}/merge", ActionPRView),
	r("GET", "/repos/{owner}/{repo}/pulls", ActionPRList),
	r("POST", "/repos/{owner}/{repo}/pulls", ActionPRCreate),
	r("GET", "/repos/{owner}/{repo}/pulls/{number}", ActionPRView),
	r("PATCH", "/repos/{owner}/{repo}/pulls/{number}", ActionPREdit),
	r("GET", "/repos/{owner}/{repo}/pulls/{number}/commits", ActionPRView),
	r("GET", "/repos/{owner}/{repo}/pulls/{number}/files", ActionPRView),
	r("GET", "/repos/{owner}/{repo}/pulls/{number}/comments", ActionPRView),
	r("GET", "/repos/{owner}/{repo}/pulls/{number}/reviews", ActionPRView),
	r("GET", "/repos/{owner}/{repo}/issues", ActionRead),
	r("GET", "/repos/{owner}/{repo}/issues/{number}", ActionIssueView),
	r("GET", "/repos/{owner}/{repo}/issues/{number}/comments", ActionIssueView),
	r("POST", "/repos/{owner}/{repo}/issues/{number}/comments", ActionIssueComment),
	r("GET", "/repos/{owner}/{repo}", ActionRead),
	r("GET", "/repos/{owner}/{repo}/branches", ActionRead),
	r("GET", "/repos/{owner}/{repo}/commits", ActionRead),
	r("GET", "/repos/{owner}/{repo}/commits/{any}", ActionRead),
	r("GET", "/repos/{owner}/{repo}/labels", ActionRead),
	r("POST", "/graphql", ActionGraphQL),
	// Refused with a reason (the rest are refused as unknown; sub-trees of
	// a repository in prefixForbidden).
	r("*", "/authorizations", ActionForbidden, "tokens are not reachable through the gateway"),
}

// prefixForbidden are path prefixes (after /repos/{owner}/{repo}) refused
// whatever follows: administration sub-trees of any depth.
var prefixForbidden = map[string]string{
	"hooks": whyAdmin, "keys": whyAdmin, "collaborators": whyAdmin, "actions": "workflows and their secrets are not reachable through the gateway",
	"environments": whyAdmin, "secrets": "secrets are not reachable through the gateway", "rulesets": whyAdmin,
	"invitations": whyAdmin, "deployments": whyAdmin, "pages": whyAdmin, "autolinks": whyAdmin,
	"git":      "writing git objects through the API is not possible through the gateway",
	"contents": "changing files through the API is not possible through the gateway",
	"merges":   whyMerge, "merge-upstream": whyMerge, "dispatches": "workflows are not reachable through the gateway",
	"transfer": whyAdmin, "topics": whyAdmin,
}

// MaxPath bounds the request path.
const MaxPath = 1024

// ClassifyREST classifies one REST request. rawPath is the escaped path
// after the relay's prefix (r.URL.EscapedPath() less "/github"), query the
// raw query. A refusal (an error wrapping ErrRequest) means the request must
// not be forwarded; a Route with ActionMerge or ActionForbidden is a
// request the gateway understood and never allows.
func ClassifyREST(method, rawPath, query string, h http.Header) (Route, error) {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete, http.MethodHead:
	default:
		return Route{}, refuse("method %q is not accepted", clip(method))
	}
	if err := checkHeaders(method, h); err != nil {
		return Route{}, err
	}
	q, err := canonicalQuery(method, query)
	if err != nil {
		return Route{}, err
	}
	segs, err := canonicalSegments(rawPath)
	if err != nil {
		return Route{}, err
	}
	canon := "/" + strings.Join(segs, "/")
	if method == http.MethodDelete {
		return Route{Path: canon, Action: ActionForbidden, Why: whyDelete}, nil
	}
	for _, rt := range routes {
		if rt.method != "*" && rt.method != method && !(rt.method == http.MethodGet && method == http.MethodHead) {
			continue
		}
		out, ok := rt.match(segs)
		if !ok {
			continue
		}
		out.Path, out.Query = canon, q
		return out, nil
	}
	if len(segs) >= 4 && segs[0] == "repos" {
		if why, ok := prefixForbidden[segs[3]]; ok {
			return Route{Path: canon, Action: ActionForbidden, Why: why, Owner: segs[1], Repo: segs[2]}, nil
		}
	}
	return Route{}, refuse("%s %s is not a route the gateway relays", method, clip(canon))
}

// MaxQuery bounds the raw query string.
const MaxQuery = 2048

// canonicalQuery parses the raw query string once and returns the form the
// relay forwards: the same parameters re-encoded (url.Values.Encode, sorted
// by name), so GitHub reads exactly what was decided. Refused: a query on
// anything but GET and HEAD (a server that merges query and body
// parameters would read what the body did not say; GraphQL is a POST), a
// malformed one (bad escapes, ';' separators), a parameter given more than
// once (servers differ on which one wins), an empty name, a name with
// brackets (array and hash syntax some servers expand), _method (a method
// override), and one longer than MaxQuery.
func canonicalQuery(method, raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if len(raw) > MaxQuery {
		return "", refuse("the query string is longer than %d bytes", MaxQuery)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "", refuse("the query string is malformed")
	}
	for name, vs := range q {
		switch {
		case name == "":
			return "", refuse("a query parameter has an empty name")
		case len(vs) > 1:
			return "", refuse("the query parameter %q is given more than once", clip(name))
		case strings.ContainsAny(name, "[]"):
			return "", refuse("the query parameter name %q holds brackets", clip(name))
		case strings.EqualFold(name, "_method"):
			return "", refuse("the _method parameter is not accepted")
		}
	}
	if method != http.MethodGet && method != http.MethodHead {
		return "", refuse("a query string is not accepted on %s (send the parameters in the JSON body)", method)
	}
	return q.Encode(), nil
}

// forwardedRequestHeaders are the only request headers sent upstream
// (Content-Type is the relay's own, for the body it re-encodes).
var forwardedRequestHeaders = []string{"Accept", "Accept-Encoding", "User-Agent", "If-None-Match",
	"If-Modified-Since", "X-Github-Api-Version", "Graphql-Features", "Time-Zone"}

// checkHeaders refuses headers GitHub might read differently from the
// gateway: a method override (any spelling of the name, which the server
// canonicalised), a forwarded header given more than once, a Content-Type
// other than JSON in UTF-8 (given more than once, or on a body the relay
// would read as something else), and a Content-Encoding (the relay reads
// the body as sent; it forwards it re-encoded, without one).
func checkHeaders(method string, h http.Header) error {
	for _, name := range methodOverrides {
		for k := range h {
			if strings.EqualFold(k, name) {
				return refuse("the %s header is not accepted", name)
			}
		}
	}
	for _, k := range forwardedRequestHeaders {
		if len(h.Values(k)) > 1 {
			return refuse("the %s header is given more than once", k)
		}
	}
	if vs := h.Values("Content-Encoding"); len(vs) > 1 || len(vs) == 1 && !strings.EqualFold(strings.TrimSpace(vs[0]), "identity") {
		return refuse("the Content-Encoding header is not accepted (send the body uncompressed)")
	}
	if method == http.MethodGet || method == http.MethodHead {
		return nil // no body is read or forwarded
	}
	switch vs := h.Values("Content-Type"); len(vs) {
	case 0:
	case 1:
		mt, params, err := mime.ParseMediaType(vs[0])
		if err != nil || mt != "application/json" {
			return refuse("the Content-Type header must be application/json")
		}
		for k, v := range params {
			if k != "charset" || !strings.EqualFold(v, "utf-8") {
				return refuse("the Content-Type header must be application/json (charset utf-8)")
			}
		}
	default:
		return refuse("the Content-Type header is given more than once")
	}
	return nil
}

// match matches segs against the template; placeholders bind values.
func (rt route) match(segs []string) (Route, bool) {
	if len(segs) != len(rt.segs) {
		return Route{}, false
	}
	out := Route{Template: rt.template, Action: rt.action, Why: rt.why}
	for i, t := range rt.segs {
		s := segs[i]
		switch t {
		case "{owner}":
			if !validName(s, 39) {
				return Route{}, false
			}
			out.Owner = s
		case "{repo}":
			if !validName(s, 100) {
				return Route{}, false
			}
			out.Repo = s
		case "{number}":
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 || n > 1<<31-1 || strconv.Itoa(n) != s {
				return Route{}, false
			}
			out.Number = n
		case "{any}":
		default:
			if s != t {
				return Route{}, false
			}
		}
	}
	return out, true
}

// canonicalSegments decodes and checks the path and returns its segments:
// literal segments lower-cased, owner and repo lower-cased too (GitHub
// compares them case-insensitively), empty segments (double and trailing
// slashes) dropped. Refused: a path not starting with '/', one longer than
// MaxPath, invalid or double percent-encoding, an encoded '/', '\' or '%',
// dot segments, control characters, non-ASCII.
func canonicalSegments(raw string) ([]string, error) {
	if !strings.HasPrefix(raw, "/") {
		return nil, refuse("the path must start with /")
	}
	if len(raw) > MaxPath {
		return nil, refuse("the path is longer than %d bytes", MaxPath)
	}
	lower := strings.ToLower(raw)
	for _, enc := range []string{"%2f", "%5c", "%25", "%2e"} {
		if strings.Contains(lower, enc) {
			return nil, refuse("the path holds an encoded %q", enc)
		}
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		return nil, refuse("the path is not validly percent-encoded")
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s == "" {
			continue
		}
		if s == "." || s == ".." {
			return nil, refuse("the path holds a dot segment")
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c <= 0x20 || c >= 0x7f || c == '\\' {
				return nil, refuse("the path holds a character that is not accepted (%q)", c)
			}
		}
		segs = append(segs, strings.ToLower(s))
	}
	if len(segs) == 0 {
		return nil, refuse("the path is empty")
	}
	return segs, nil
}

// validName reports whether s can be a GitHub owner or repository name.
func validName(s string, max int) bool {
	if s == "" || len(s) > max || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
