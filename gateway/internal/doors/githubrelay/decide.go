package githubrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/ast"

	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/strictjson"
)

// restCall maps a classified REST request to the github tool call that
// decides it: the tool's name and arguments (owner, repo, number, title,
// head, base; never a body's text, which is recorded as its length only),
// and sent, the request body as decided (nil for a request without one):
// the relay forwards it re-encoded, never the bytes it received. why is set
// when the request cannot be mapped (a malformed or unexpected body): it is
// refused.
//
// ActionRead (repository metadata, branches, commits, labels, the issue
// list) has no tool: it is decided as github__pr_list of owner/repo, the
// read the policy already governs for the repository (the base policy
// allows it; a policy that restricts reads by owner or repository restricts
// these the same way).
func restCall(rt Route, body []byte, maxBody int64) (tool string, args, sent map[string]any, why string) {
	args = map[string]any{"owner": rt.Owner, "repo": rt.Repo}
	if rt.Number != 0 {
		args["number"] = rt.Number
	}
	switch rt.Action {
	case ActionRead, ActionPRList:
		return "github__pr_list", map[string]any{"owner": rt.Owner, "repo": rt.Repo}, nil, ""
	case ActionPRView:
		return "github__pr_view", args, nil, ""
	case ActionIssueView:
		return "github__issue_view", args, nil, ""
	case ActionIssueComment:
		// A pull request's conversation comments are issue comments: the
		// same rules decide both (issue_comment).
		m, err := jsonObject(body, maxBody, map[string]fieldKind{"body": fieldString})
		if err != nil {
			return "github__issue_comment", args, nil, err.Error()
		}
		return "github__issue_comment", args, m, ""
	case ActionPRCreate:
		m, err := jsonObject(body, maxBody, map[string]fieldKind{"title": fieldString, "head": fieldString, "base": fieldString,
			"body": fieldText, "draft": fieldBool, "maintainer_can_modify": fieldBool, "head_repo": fieldString, "issue": fieldAny})
		if err != nil {
			return "github__pr_create", args, nil, err.Error()
		}
		if _, ok := m["issue"]; ok {
			return "github__pr_create", args, nil, "converting an issue into a pull request is not possible through the gateway"
		}
		for _, k := range []string{"title", "head", "base"} {
			if s, ok := m[k].(string); ok {
				args[k] = s
			}
		}
		return "github__pr_create", args, m, ""
	case ActionPREdit:
		m, err := jsonObject(body, maxBody, map[string]fieldKind{"title": fieldString, "body": fieldText, "base": fieldString,
			"state": fieldString, "maintainer_can_modify": fieldBool})
		if err != nil {
			return "github__pr_edit", args, nil, err.Error()
		}
		state, hasState := m["state"]
		if hasState {
			if state != "closed" || len(m) != 1 {
				return "github__pr_edit", args, nil, `a state change must be {"state":"closed"} alone (reopening is not possible through the gateway)`
			}
			return "github__pr_close", args, m, ""
		}
		for _, k := range []string{"title", "base"} {
			if s, ok := m[k].(string); ok {
				args[k] = s
			}
		}
		return "github__pr_edit", args, m, ""
	}
	return "github__pr_edit", args, nil, fmt.Sprintf("the action %q has no tool", rt.Action)
}

// fieldKind is the JSON type a REST body field must have.
type fieldKind int

const (
	fieldString fieldKind = iota // a string
	fieldText                    // a string or null
	fieldBool                    // true or false
	fieldAny                     // any value (the caller refuses or checks it)
)

// jsonObject decodes body as one JSON object, strictly (strictjson: names
// exact, each once, nothing after the object, valid UTF-8, at most maxBody
// bytes), whose names are all in fields and whose values have the field's
// type. The error is short and names the field.
func jsonObject(body []byte, maxBody int64, fields map[string]fieldKind) (map[string]any, error) {
	var m map[string]any
	if err := strictjson.Decode(body, &m, strictjson.Limits{MaxBytes: int(maxBody), MaxDepth: 8}); err != nil {
		return nil, fmt.Errorf("the request body is not accepted: %s", jsonReason(err))
	}
	if m == nil {
		return nil, errors.New("the request body is not one JSON object")
	}
	for k, v := range m {
		kind, ok := fields[k]
		if !ok {
			return nil, fmt.Errorf("the request body field %q is not accepted", clip(k))
		}
		okType := true
		switch kind {
		case fieldString:
			_, okType = v.(string)
		case fieldText:
			_, okType = v.(string)
			okType = okType || v == nil
		case fieldBool:
			_, okType = v.(bool)
		}
		if !okType {
			return nil, fmt.Errorf("the request body field %q has the wrong type", clip(k))
		}
	}
	return m, nil
}

// readRootFields are the GraphQL query root fields the relay forwards.
// repository(owner:, name:) is decided as github__pr_list of that
// repository; viewer, rateLimit and __typename read nothing of a
// repository (the gateway account's own login and limits) and are decided
// as github__pr_list of the repository named, or — with no repository in
// the query — of owner "viewer"/repo "viewer", so that a policy can still
// match them. node, nodes, search, organization, user and the rest are
// refused: they reach repositories by id or across owners.
var readRootFields = map[string]bool{"repository": true, "viewer": true, "rateLimit": true, "__typename": true,
	// Introspection (the public schema; gh asks __type before pr commands
	// to detect features).
	"__type": true, "__schema": true}

// serveGraphQL decides and forwards a GraphQL request: a query as one read
// of the one repository it names; a mutation (one root field per request)
// as one call of its tool on the target its node id resolves to.
func (h *Handler) serveGraphQL(w http.ResponseWriter, r *http.Request, sess session.Session, rt Route, body []byte, rec map[string]any) {
	g, err := ClassifyGraphQL(body)
	if err != nil {
		tool := "github__pr_view"
		if strings.Contains(err.Error(), "mutation") {
			tool = "github__pr_edit"
		}
		rule := RuleRequest
		if strings.Contains(err.Error(), whyMerge) {
			rule = RuleMerge
		}
		h.refuse(w, r, sess, tool, rule, safeReason(err), rec)
		return
	}
	var ops []string
	for _, op := range g.Ops {
		ops = append(ops, op.Type+" "+op.Name+" {"+strings.Join(op.Fields, " ")+"}")
	}
	rec["graphql"] = ops
	vars, err := decodeVars(g.Variables)
	if err != nil {
		h.refuse(w, r, sess, "github__pr_view", RuleRequest, err.Error(), rec)
		return
	}
	muts := mutationFields(g.doc)
	if len(muts) == 0 {
		tool, args, why := h.graphQLRead(g.doc, vars)
		if why != "" {
			h.refuse(w, r, sess, tool, RuleRequest, why, rec)
			return
		}
		h.decideAndForward(w, r, sess, tool, args, policy.DoorContent{}, rec, h.graphql, g.Forward)
		return
	}
	for _, op := range g.Ops {
		if op.Type != "mutation" {
			// GitHub runs the operation operationName selects: a query
			// beside a mutation would be a read no decision covered.
			h.refuse(w, r, sess, "github__pr_edit", RuleRequest, "a GraphQL request may not mix queries and mutations", rec)
			return
		}
	}
	if len(muts) > 1 {
		h.refuse(w, r, sess, "github__pr_edit", RuleRequest, "a GraphQL request may hold one mutation field (each is decided on its own target: send them one by one)", rec)
		return
	}
	tool, args, why := h.graphQLMutation(r.Context(), sess.ID, muts[0], vars)
	if why != "" {
		h.refuse(w, r, sess, tool, RuleRequest, why, rec)
		return
	}
	if tool == "github__pr_edit" || tool == "github__pr_close" {
		owner, _ := args["owner"].(string)
		repo, _ := args["repo"].(string)
		n, _ := args["number"].(int)
		if err := h.d.Owner.OwnPR(lookupContext(r.Context(), sess.ID), strings.TrimPrefix(tool, "github__"), owner, repo, n); err != nil {
			h.refuse(w, r, sess, tool, RuleNotOwnPR, err.Error(), rec)
			return
		}
	}
	// The mutation's input as GitHub will read it (variables applied):
	// every text it sends is scanned for secrets.
	var input any
	if v, err := muts[0].Arguments[0].Value.Value(vars); err == nil {
		input = v
	}
	dc := h.doorContent("mutation input", input, g.Forward)
	h.decideAndForward(w, r, sess, tool, args, dc, rec, h.graphql, g.Forward)
}

func decodeVars(raw map[string]json.RawMessage) (map[string]any, error) {
	vars := make(map[string]any, len(raw))
	for k, v := range raw {
		var x any
		if err := strictjson.Decode(v, &x, strictjson.Limits{MaxBytes: MaxGraphQLBody}); err != nil {
			return nil, errors.New("a GraphQL variable is not valid JSON")
		}
		vars[k] = x
	}
	return vars, nil
}

// collectFields appends the fields selected at the level of set, through
// inline fragments and fragment spreads (each spread once).
func collectFields(doc *ast.QueryDocument, set ast.SelectionSet, out *[]*ast.Field, seen map[string]bool, depth int) {
	if depth > maxFragmentDepth {
		return // ClassifyGraphQL refused deeper nesting already
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			*out = append(*out, s)
		case *ast.InlineFragment:
			collectFields(doc, s.SelectionSet, out, seen, depth+1)
		case *ast.FragmentSpread:
			if seen[s.Name] {
				continue
			}
			seen[s.Name] = true
			if f := doc.Fragments.ForName(s.Name); f != nil {
				collectFields(doc, f.SelectionSet, out, seen, depth+1)
			}
		}
	}
}

// mutationFields are the root fields (occurrences, not names) of every
// mutation operation of the document, __typename aside.
func mutationFields(doc *ast.QueryDocument) []*ast.Field {
	var out []*ast.Field
	for _, op := range doc.Operations {
		if op.Operation != ast.Mutation {
			continue
		}
		var fs []*ast.Field
		collectFields(doc, op.SelectionSet, &fs, map[string]bool{}, 0)
		for _, f := range fs {
			if f.Name != "__typename" {
				out = append(out, f)
			}
		}
	}
	return out
}

// graphQLRead decides a query document: every operation's root fields must
// be in readRootFields, and they may name one repository.
func (h *Handler) graphQLRead(doc *ast.QueryDocument, vars map[string]any) (string, map[string]any, string) {
	owner, repo := "", ""
	for _, op := range doc.Operations {
		var fs []*ast.Field
		collectFields(doc, op.SelectionSet, &fs, map[string]bool{}, 0)
		for _, f := range fs {
			if !readRootFields[f.Name] {
				return "github__pr_view", nil, fmt.Sprintf("the GraphQL query field %s is not relayed (only repository, viewer, rateLimit and introspection)", clip(f.Name))
			}
			if f.Name == "viewer" || f.Name == "rateLimit" {
				// The account's own scalars only (login, id, limits): the
				// viewer's repositories and organisations would be reads
				// of repositories no decision names.
				for _, sel := range f.SelectionSet {
					leaf, ok := sel.(*ast.Field)
					if !ok || len(leaf.SelectionSet) != 0 {
						return "github__pr_list", nil, fmt.Sprintf("the GraphQL %s field may select only scalar fields (such as login)", f.Name)
					}
				}
				continue
			}
			if f.Name != "repository" {
				continue
			}
			o, err1 := stringArg(f, "owner", vars)
			n, err2 := stringArg(f, "name", vars)
			if err1 != nil || err2 != nil || !validName(strings.ToLower(o), 39) || !validName(strings.ToLower(n), 100) {
				return "github__pr_list", nil, "a GraphQL repository field needs a valid owner and name"
			}
			o, n = strings.ToLower(o), strings.ToLower(n)
			if owner != "" && (owner != o || repo != n) {
				return "github__pr_list", nil, "a GraphQL query may name one repository"
			}
			owner, repo = o, n
		}
	}
	if owner == "" {
		owner, repo = "viewer", "viewer"
	}
	return "github__pr_list", map[string]any{"owner": owner, "repo": repo}, ""
}

// stringArg resolves a field's string argument (inline or a variable).
func stringArg(f *ast.Field, name string, vars map[string]any) (string, error) {
	a := f.Arguments.ForName(name)
	if a == nil || a.Value == nil {
		return "", fmt.Errorf("argument %s is missing", name)
	}
	v, err := a.Value.Value(vars)
	if err != nil {
		return "", fmt.Errorf("resolving argument %s: %w", name, err)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("argument %s is not a string", name)
	}
	return s, nil
}

// mutationInputs names, per allowed mutation, the node id field of its
// input and the input fields passed to the tool.
var mutationInputs = map[string]struct {
	idField string
	fields  map[string]string // input field -> tool argument
	allowed map[string]bool   // input fields accepted
}{
	"createPullRequest": {"repositoryId", map[string]string{"title": "title", "headRefName": "head", "baseRefName": "base"},
		set("repositoryId", "title", "headRefName", "baseRefName", "body", "draft", "maintainerCanModify", "clientMutationId", "headRepositoryId")},
	"addComment":        {"subjectId", nil, set("subjectId", "body", "clientMutationId")},
	"updatePullRequest": {"pullRequestId", map[string]string{"title": "title", "baseRefName": "base"}, set("pullRequestId", "title", "body", "baseRefName", "maintainerCanModify", "clientMutationId", "state")},
	"closePullRequest":  {"pullRequestId", nil, set("pullRequestId", "clientMutationId")},
}

func set(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// graphQLMutation resolves one allowed mutation field to its tool call:
// the input (inline or a variable) is read from the AST with the request's
// variables, its node id is resolved to owner/repo[/number] with the
// gateway's token, and the node's type must fit the mutation.
func (h *Handler) graphQLMutation(ctx context.Context, sessionID string, f *ast.Field, vars map[string]any) (string, map[string]any, string) {
	spec, ok := mutationInputs[f.Name]
	if !ok {
		return "github__pr_edit", nil, fmt.Sprintf("mutation %s is not on the gateway's list of allowed mutations", clip(f.Name))
	}
	if len(f.Arguments) != 1 || f.Arguments[0].Name != "input" {
		return "github__pr_edit", nil, fmt.Sprintf("mutation %s must have exactly one argument, input", f.Name)
	}
	v, err := f.Arguments[0].Value.Value(vars)
	if err != nil {
		return "github__pr_edit", nil, fmt.Sprintf("mutation %s: its input cannot be resolved", f.Name)
	}
	in, ok := v.(map[string]any)
	if !ok {
		return "github__pr_edit", nil, fmt.Sprintf("mutation %s: its input is not an object", f.Name)
	}
	for k := range in {
		if !spec.allowed[k] {
			return "github__pr_edit", nil, fmt.Sprintf("mutation %s: the input field %s is not accepted", f.Name, clip(k))
		}
	}
	if _, ok := in["headRepositoryId"]; ok {
		return "github__pr_create", nil, "createPullRequest from another repository (headRepositoryId) is not possible through the gateway"
	}
	id, _ := in[spec.idField].(string)
	if id == "" {
		return "github__pr_edit", nil, fmt.Sprintf("mutation %s: %s is missing", f.Name, spec.idField)
	}
	node, err := h.resolveNode(ctx, sessionID, id)
	if err != nil {
		h.log.Warn("github relay: resolving a node id failed", "err", h.redact(err.Error()))
		return "github__pr_edit", nil, fmt.Sprintf("mutation %s: the node %s could not be resolved to a repository", f.Name, clip(id))
	}
	args := map[string]any{"owner": node.owner, "repo": node.repo}
	if node.number != 0 {
		args["number"] = node.number
	}
	for k, a := range spec.fields {
		if s, ok := in[k].(string); ok {
			args[a] = s
		}
	}
	switch f.Name {
	case "createPullRequest":
		if node.typ != "Repository" {
			return "github__pr_create", nil, "createPullRequest: repositoryId is not a repository"
		}
		return "github__pr_create", args, ""
	case "addComment":
		switch node.typ {
		case "PullRequest":
			return "github__pr_comment", args, ""
		case "Issue":
			return "github__issue_comment", args, ""
		}
		return "github__pr_comment", nil, "addComment: the subject is neither a pull request nor an issue"
	case "updatePullRequest":
		if node.typ != "PullRequest" {
			return "github__pr_edit", nil, "updatePullRequest: pullRequestId is not a pull request"
		}
		if st, ok := in["state"]; ok {
			only := true
			for k := range in {
				if k != "state" && k != "pullRequestId" && k != "clientMutationId" {
					only = false
				}
			}
			if st != "CLOSED" || !only {
				return "github__pr_edit", nil, "updatePullRequest: a state change must be CLOSED alone (reopening is not possible through the gateway)"
			}
			return "github__pr_close", args, ""
		}
		return "github__pr_edit", args, ""
	case "closePullRequest":
		if node.typ != "PullRequest" {
			return "github__pr_close", nil, "closePullRequest: pullRequestId is not a pull request"
		}
		return "github__pr_close", args, ""
	}
	return "github__pr_edit", nil, "unknown mutation"
}

type nodeRef struct {
	typ         string
	owner, repo string
	number      int
}

const nodeQuery = `query($id:ID!){node(id:$id){__typename ... on Repository{nameWithOwner} ... on PullRequest{number repository{nameWithOwner}} ... on Issue{number repository{nameWithOwner}}}}`

// resolveNode asks GitHub, with the gateway's token, what a node id is.
func (h *Handler) resolveNode(ctx context.Context, sessionID, id string) (nodeRef, error) {
	if len(id) > 200 {
		return nodeRef{}, errors.New("the node id is too long")
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	q, err := json.Marshal(map[string]any{"query": nodeQuery, "variables": map[string]string{"id": id}})
	if err != nil {
		return nodeRef{}, fmt.Errorf("encoding the node query: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.graphql, bytes.NewReader(q))
	if err != nil {
		return nodeRef{}, fmt.Errorf("building the node query: %w", err)
	}
	req.Header.Set("Authorization", "token "+h.cfg.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ironcurtain-gateway")
	start := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		h.egress(ctx, sessionID, http.MethodPost, h.graphql, start, int64(len(q)), 0, 0, err)
		return nodeRef{}, fmt.Errorf("querying the node: %w", err)
	}
	defer resp.Body.Close()
	defer func() {
		h.egress(ctx, sessionID, http.MethodPost, h.graphql, start, int64(len(q)), 0, resp.StatusCode, nil)
	}()
	if resp.StatusCode != http.StatusOK {
		return nodeRef{}, fmt.Errorf("querying the node: GitHub answered %d", resp.StatusCode)
	}
	var out struct {
		Data struct {
			Node *struct {
				Typename      string `json:"__typename"`
				NameWithOwner string `json:"nameWithOwner"`
				Number        int    `json:"number"`
				Repository    *struct {
					NameWithOwner string `json:"nameWithOwner"`
				} `json:"repository"`
			} `json:"node"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&out); err != nil {
		return nodeRef{}, fmt.Errorf("decoding the node: %w", err)
	}
	n := out.Data.Node
	if n == nil {
		return nodeRef{}, errors.New("no such node")
	}
	ref := nodeRef{typ: n.Typename}
	nwo := n.NameWithOwner
	switch n.Typename {
	case "Repository":
	case "PullRequest", "Issue":
		if n.Repository == nil || n.Number <= 0 {
			return nodeRef{}, errors.New("the node has no repository or number")
		}
		nwo, ref.number = n.Repository.NameWithOwner, n.Number
	default:
		return nodeRef{}, fmt.Errorf("the node is a %s", clip(n.Typename))
	}
	o, rp, ok := strings.Cut(strings.ToLower(nwo), "/")
	if !ok || !validName(o, 39) || !validName(rp, 100) {
		return nodeRef{}, errors.New("the node's repository name is not valid")
	}
	ref.owner, ref.repo = o, rp
	return ref, nil
}
