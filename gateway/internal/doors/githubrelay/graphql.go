package githubrelay

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"ironcurtain.dev/gateway/strictjson"
)

// GraphQL bounds.
const (
	// MaxGraphQLBody bounds the request body.
	MaxGraphQLBody = 256 << 10
	// MaxGraphQLTokens bounds the parser's work.
	MaxGraphQLTokens = 15000
	// maxFragmentDepth bounds fragment spreads followed inside one another.
	maxFragmentDepth = 32
)

// Mutations maps the GraphQL mutations the gateway may forward to the
// github tool whose rules decide them. Every other mutation is refused:
// mergePullRequest, enablePullRequestAutoMerge, the merge queue's
// enqueuePullRequest, deletions, administration, and mutations GitHub adds
// later.
var Mutations = map[string]Action{
	"createPullRequest": ActionPRCreate,
	"addComment":        ActionPRComment,
	"updatePullRequest": ActionPREdit,
	"closePullRequest":  ActionPRClose,
}

// neverMutations are named in refusals so the reason is specific.
var neverMutations = map[string]string{
	"mergePullRequest":            whyMerge,
	"enablePullRequestAutoMerge":  whyMerge,
	"enqueuePullRequest":          whyMerge,
	"mergeBranch":                 whyMerge,
	"updatePullRequestBranch":     "updating a pull request's branch is not possible through the gateway",
	"deleteRef":                   whyDelete,
	"deleteRepository":            whyDelete,
	"createCommitOnBranch":        "committing through the API is not possible through the gateway",
	"updateBranchProtectionRule":  whyAdmin,
	"deleteBranchProtectionRule":  whyAdmin,
	"approveDeployments":          whyAdmin,
	"dismissPullRequestReview":    whyAdmin,
	"addPullRequestReview":        "reviewing is not possible through the gateway",
	"submitPullRequestReview":     "reviewing is not possible through the gateway",
	"disablePullRequestAutoMerge": whyMerge,
}

// GraphQLOp is one operation of a GraphQL document.
type GraphQLOp struct {
	Type string // "query" or "mutation"
	Name string
	// Fields are the root fields (names, not aliases), sorted, each once.
	Fields []string
}

// graphQLBody is a GraphQL request body as GitHub reads it: exactly these
// names, each once, and nothing else (strictjson). It is also the form the
// relay forwards: re-encoded from the decoded value, never the bytes sent.
type graphQLBody struct {
	Query         string                    `json:"query"`
	OperationName string                    `json:"operationName,omitzero"`
	Variables     map[string]jsontext.Value `json:"variables,omitzero"`
}

// GraphQLRequest is a classified GraphQL request.
type GraphQLRequest struct {
	Ops []GraphQLOp
	// Query and OperationName are the decided ones (exact names).
	Query, OperationName string
	// Variables as decided (each value checked strictly: no duplicate
	// names at any depth); the relay resolves mutation inputs from them.
	Variables map[string]json.RawMessage
	// Forward is the body the relay sends GitHub: the decided query,
	// operationName and variables re-encoded, never the bytes received.
	Forward []byte
	// Mutations are the allowed mutations the document holds, with the
	// tool that decides each; empty for a read.
	Mutations []Action

	doc *ast.QueryDocument // the parsed document (the relay finds mutation inputs in it)
}

// ClassifyGraphQL parses a GraphQL request body and classifies every
// operation in it. The body is decoded strictly (strictjson): names match
// exactly ("Query" is not "query"), a name given twice, a top-level name
// other than query, operationName and variables, invalid UTF-8 and anything
// after the object are refused, so the gateway and GitHub read the same
// request. Refused (an error wrapping ErrRequest): a body that is
// not one JSON object (batched arrays are refused), a body over
// MaxGraphQLBody, a query that does not parse or exceeds MaxGraphQLTokens,
// no operation, subscriptions, an operationName that names no operation,
// several operations without one, an unknown or undefined fragment, a
// fragment cycle, and any mutation not in Mutations (with the reason for
// those in neverMutations). Every operation in the document is checked,
// not only the one operationName selects.
func ClassifyGraphQL(body []byte) (GraphQLRequest, error) {
	if len(body) > MaxGraphQLBody {
		return GraphQLRequest{}, refuse("the GraphQL body is larger than %d bytes", MaxGraphQLBody)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return GraphQLRequest{}, refuse("batched GraphQL requests are not supported")
	}
	var req graphQLBody
	if err := strictjson.Decode(body, &req, strictjson.Limits{MaxBytes: MaxGraphQLBody}); err != nil {
		reason := jsonReason(err)
		if strings.Contains(reason, "after the JSON value") {
			return GraphQLRequest{}, refuse("the GraphQL body holds more than one JSON value")
		}
		return GraphQLRequest{}, refuse("the GraphQL body is not a JSON object of query, operationName and variables as GitHub reads it: %s", reason)
	}
	if req.Query == "" {
		return GraphQLRequest{}, refuse("the GraphQL body has no query")
	}
	fwd, err := strictjson.Marshal(req)
	if err != nil {
		return GraphQLRequest{}, refuse("the GraphQL body cannot be re-encoded")
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: req.Query}, MaxGraphQLTokens)
	if err != nil {
		return GraphQLRequest{}, refuse("the GraphQL query does not parse: %s", clip(err.Error()))
	}
	if len(doc.Operations) == 0 {
		return GraphQLRequest{}, refuse("the GraphQL document holds no operation")
	}
	if req.OperationName != "" {
		if doc.Operations.ForName(req.OperationName) == nil {
			return GraphQLRequest{}, refuse("operationName %q names no operation of the document", clip(req.OperationName))
		}
	} else if len(doc.Operations) > 1 {
		return GraphQLRequest{}, refuse("the GraphQL document holds several operations and no operationName")
	}
	out := GraphQLRequest{Query: req.Query, OperationName: req.OperationName, Forward: fwd, doc: doc}
	if req.Variables != nil {
		out.Variables = make(map[string]json.RawMessage, len(req.Variables))
		for k, v := range req.Variables {
			out.Variables[k] = json.RawMessage(v)
		}
	}
	seenMut := map[Action]bool{}
	for _, op := range doc.Operations {
		var typ string
		switch op.Operation {
		case ast.Query:
			typ = "query"
		case ast.Mutation:
			typ = "mutation"
		default:
			return GraphQLRequest{}, refuse("GraphQL %s operations are not supported", clip(string(op.Operation)))
		}
		set := map[string]bool{}
		if err := rootFields(doc, op.SelectionSet, set, map[string]bool{}, 0); err != nil {
			return GraphQLRequest{}, err
		}
		g := GraphQLOp{Type: typ, Name: op.Name}
		for f := range set {
			if !strings.HasPrefix(f, "...") { // expanded fragments, not fields
				g.Fields = append(g.Fields, f)
			}
		}
		sort.Strings(g.Fields)
		if typ == "mutation" {
			for _, f := range g.Fields {
				if f == "__typename" {
					continue
				}
				a, ok := Mutations[f]
				if !ok {
					if why, known := neverMutations[f]; known {
						return GraphQLRequest{}, refuse("mutation %s: %s", f, why)
					}
					return GraphQLRequest{}, refuse("mutation %s is not on the gateway's list of allowed mutations", clip(f))
				}
				if !seenMut[a] {
					seenMut[a] = true
					out.Mutations = append(out.Mutations, a)
				}
			}
		}
		out.Ops = append(out.Ops, g)
	}
	return out, nil
}

// jsonReason is a strictjson refusal's short reason with where it was
// found (names from the body are clipped).
func jsonReason(err error) string {
	var je *strictjson.Error
	if errors.As(err, &je) {
		if je.Path == "" {
			return je.Reason
		}
		return je.Reason + " at " + clip(je.Path)
	}
	return "the body is not valid JSON"
}

// rootFields adds the names of the fields selected at the level of set,
// looking through inline fragments and fragment spreads (a spread's
// fields are at the spreading level). Each fragment is expanded once per
// operation (marked "...name" in out), so spreads that fan out cannot make
// the walk exponential.
func rootFields(doc *ast.QueryDocument, set ast.SelectionSet, out, inSpread map[string]bool, depth int) error {
	if depth > maxFragmentDepth {
		return refuse("GraphQL fragments are nested deeper than %d", maxFragmentDepth)
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			out[s.Name] = true
		case *ast.InlineFragment:
			if err := rootFields(doc, s.SelectionSet, out, inSpread, depth+1); err != nil {
				return err
			}
		case *ast.FragmentSpread:
			if inSpread[s.Name] {
				return refuse("GraphQL fragment %s spreads itself", clip(s.Name))
			}
			if out["..."+s.Name] {
				continue // expanded once already: its fields are in out
			}
			out["..."+s.Name] = true
			frag := doc.Fragments.ForName(s.Name)
			if frag == nil {
				return refuse("GraphQL fragment %s is not defined", clip(s.Name))
			}
			inSpread[s.Name] = true
			err := rootFields(doc, frag.SelectionSet, out, inSpread, depth+1)
			delete(inSpread, s.Name)
			if err != nil {
				return err
			}
		default:
			return refuse("unknown GraphQL selection")
		}
	}
	return nil
}
