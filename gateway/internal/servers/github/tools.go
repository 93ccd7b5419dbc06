package github

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// Input limits (GitHub's own limit for a body is 65536 characters).
const (
	maxTitle  = 256
	maxBody   = 65536
	maxBranch = 255
	maxPage   = 100
)

type kind int

const (
	kindString kind = iota
	kindInt
	kindBool
)

// param declares one argument: its type, JSON Schema and policy role.
type param struct {
	name     string
	kind     kind
	required bool
	desc     string
	enum     []string
	role     policy.Role
	max      int // string length (characters) or integer maximum; 0: none
}

// toolDef declares one tool.
type toolDef struct {
	name    string
	desc    string
	comment string
	params  []param
	run     func(s *Server, ctx context.Context, a args) (string, error)
}

var (
	pOwner = param{name: "owner", kind: kindString, required: true, role: policy.RoleGitHubOwner,
		desc: "Repository owner (user or organisation)."}
	pRepo = param{name: "repo", kind: kindString, required: true, role: policy.RoleGitHubRepo,
		desc: "Repository name."}
	pNumber = param{name: "number", kind: kindInt, required: true, role: policy.RoleNone, max: math.MaxInt32,
		desc: "Pull request or issue number."}
	pBody = param{name: "body", kind: kindString, required: true, role: policy.RoleNone, max: maxBody,
		desc: "Comment text (markdown)."}
)

var toolDefs = []toolDef{
	{
		name:    "pr_create",
		desc:    "Open a pull request from branch head into branch base of owner/repo.",
		comment: "Opens a pull request in a GitHub repository.",
		params: []param{pOwner, pRepo,
			{name: "title", kind: kindString, required: true, role: policy.RoleNone, max: maxTitle, desc: "Pull request title."},
			{name: "head", kind: kindString, required: true, role: policy.RoleBranchName, max: maxBranch, desc: "Branch with the changes (or user:branch for a fork)."},
			{name: "base", kind: kindString, required: true, role: policy.RoleBranchName, max: maxBranch, desc: "Branch to merge into."},
			{name: "body", kind: kindString, role: policy.RoleNone, max: maxBody, desc: "Pull request description (markdown)."},
			{name: "draft", kind: kindBool, role: policy.RoleNone, desc: "Open as a draft."},
		},
		run: (*Server).prCreate,
	},
	{
		name:    "pr_view",
		desc:    "Show a pull request: title, state, author, branches, description.",
		comment: "Reads one pull request of a GitHub repository.",
		params:  []param{pOwner, pRepo, pNumber},
		run:     (*Server).prView,
	},
	{
		name:    "pr_list",
		desc:    "List pull requests of owner/repo.",
		comment: "Lists pull requests of a GitHub repository.",
		params: []param{pOwner, pRepo,
			{name: "state", kind: kindString, role: policy.RoleNone, enum: []string{"open", "closed", "all"}, desc: "Filter by state (default open)."},
			{name: "head", kind: kindString, role: policy.RoleBranchName, max: maxBranch, desc: "Filter by head, as user:branch."},
			{name: "base", kind: kindString, role: policy.RoleBranchName, max: maxBranch, desc: "Filter by base branch."},
			{name: "per_page", kind: kindInt, role: policy.RoleNone, max: maxPage, desc: "Results per page (1-100, default 30)."},
			{name: "page", kind: kindInt, role: policy.RoleNone, max: 10000, desc: "Page number (default 1)."},
		},
		run: (*Server).prList,
	},
	{
		name:    "pr_comment",
		desc:    "Add a comment to a pull request's conversation.",
		comment: "Posts a comment on a pull request of a GitHub repository.",
		params:  []param{pOwner, pRepo, pNumber, pBody},
		run:     (*Server).prComment,
	},
	{
		name:    "pr_edit",
		desc:    "Change the title, description or base branch of a pull request the gateway's account opened.",
		comment: "Edits a pull request the gateway's own account opened.",
		params: []param{pOwner, pRepo, pNumber,
			{name: "title", kind: kindString, role: policy.RoleNone, max: maxTitle, desc: "New title."},
			{name: "body", kind: kindString, role: policy.RoleNone, max: maxBody, desc: "New description (markdown)."},
			{name: "base", kind: kindString, role: policy.RoleBranchName, max: maxBranch, desc: "New base branch."},
		},
		run: (*Server).prEdit,
	},
	{
		name:    "pr_close",
		desc:    "Close (without merging) a pull request the gateway's account opened.",
		comment: "Closes, without merging, a pull request the gateway's own account opened.",
		params:  []param{pOwner, pRepo, pNumber},
		run:     (*Server).prClose,
	},
	{
		name:    "issue_view",
		desc:    "Show an issue with its most recent comments.",
		comment: "Reads one issue of a GitHub repository and its recent comments.",
		params:  []param{pOwner, pRepo, pNumber},
		run:     (*Server).issueView,
	},
	{
		name:    "issue_comment",
		desc:    "Add a comment to an issue.",
		comment: "Posts a comment on an issue of a GitHub repository.",
		params:  []param{pOwner, pRepo, pNumber, pBody},
		run:     (*Server).issueComment,
	},
}

var toolsByName = func() map[string]*toolDef {
	m := make(map[string]*toolDef, len(toolDefs))
	for i := range toolDefs {
		m[toolDefs[i].name] = &toolDefs[i]
	}
	return m
}()

// Tools returns the tools of the github server with their annotations; it
// needs no Server (the annotations command lists them without a token).
func Tools() []servers.Tool {
	out := make([]servers.Tool, 0, len(toolDefs))
	for _, d := range toolDefs {
		schema := d.schema()
		ann := policy.ToolAnnotation{Tool: d.name, Server: ServerName, Comment: d.comment, InputSchema: schema}
		for _, p := range d.params {
			ann.Args = append(ann.Args, policy.ArgAnnotation{Name: p.name, Spec: policy.Static(p.role)})
		}
		out = append(out, servers.Tool{Name: d.name, Description: d.desc, InputSchema: schema, Annotation: ann})
	}
	return out
}

func (d toolDef) schema() json.RawMessage {
	props := make(map[string]any, len(d.params))
	var required []string
	for _, p := range d.params {
		prop := map[string]any{"description": p.desc}
		switch p.kind {
		case kindString:
			prop["type"] = "string"
			if p.max > 0 {
				prop["maxLength"] = p.max
			}
		case kindInt:
			prop["type"] = "integer"
			prop["minimum"] = 1
			if p.max > 0 {
				prop["maximum"] = p.max
			}
		case kindBool:
			prop["type"] = "boolean"
		}
		if len(p.enum) > 0 {
			prop["enum"] = p.enum
		}
		props[p.name] = prop
		if p.required {
			required = append(required, p.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("github: schema of %s: %v", d.name, err)) // static data
	}
	return b
}

// args are the checked arguments of one call.
type args struct {
	owner, repo string
	number      int
	str         map[string]string // optional and required strings by name
	ints        map[string]int
	bools       map[string]bool
}

func (a args) has(name string) bool { _, ok := a.str[name]; return ok }

var (
	// GitHub logins and organisation names: alphanumerics and single
	// hyphens, not at either end, at most 39 characters.
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)
	// Repository names: alphanumerics, '.', '-', '_', at most 100.
	repoRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// parseArgs checks every argument against its declaration. Messages are
// short and name the argument.
func parseArgs(d *toolDef, in map[string]any) (args, error) {
	a := args{str: map[string]string{}, ints: map[string]int{}, bools: map[string]bool{}}
	known := make(map[string]*param, len(d.params))
	for i := range d.params {
		known[d.params[i].name] = &d.params[i]
	}
	for k := range in {
		if _, ok := known[k]; !ok {
			return a, fmt.Errorf("unknown argument %q", cutArg(k))
		}
	}
	for _, p := range d.params {
		v, present := in[p.name]
		if !present || v == nil {
			if p.required {
				return a, fmt.Errorf("%s is required", p.name)
			}
			continue
		}
		switch p.kind {
		case kindString:
			s, ok := v.(string)
			if !ok {
				return a, fmt.Errorf("%s must be a string", p.name)
			}
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				return a, fmt.Errorf("%s must be valid text", p.name)
			}
			if p.max > 0 && utf8.RuneCountInString(s) > p.max {
				return a, fmt.Errorf("%s is longer than %d characters", p.name, p.max)
			}
			if len(p.enum) > 0 && !contains(p.enum, s) {
				return a, fmt.Errorf("%s must be one of %s", p.name, strings.Join(p.enum, ", "))
			}
			if p.role == policy.RoleBranchName {
				if err := checkBranch(p.name, s); err != nil {
					return a, err
				}
			}
			a.str[p.name] = s
		case kindInt:
			n, ok := intArg(v)
			if !ok || n < 1 || (p.max > 0 && n > p.max) {
				return a, fmt.Errorf("%s must be a positive integer", p.name)
			}
			a.ints[p.name] = n
		case kindBool:
			b, ok := v.(bool)
			if !ok {
				return a, fmt.Errorf("%s must be true or false", p.name)
			}
			a.bools[p.name] = b
		}
	}
	if o, ok := a.str["owner"]; ok {
		if !ownerRE.MatchString(o) {
			return a, fmt.Errorf("owner %q is not a valid GitHub account name", cutArg(o))
		}
		a.owner = o
	}
	if raw, ok := a.str["repo"]; ok {
		// Trim ".git" first, then check: "..git" would otherwise become "."
		r := strings.TrimSuffix(raw, ".git")
		if !repoRE.MatchString(r) || r == "." || r == ".." {
			return a, fmt.Errorf("repo %q is not a valid GitHub repository name", cutArg(raw))
		}
		a.repo = r
	}
	a.number = a.ints["number"]
	return a, nil
}

// checkBranch refuses branch names git would refuse and anything that could
// be read as something else (options, control characters, ranges).
func checkBranch(name, s string) error {
	bad := s == "" || strings.HasPrefix(s, "-") || strings.ContainsAny(s, " ~^?*[\\\x7f") ||
		strings.Contains(s, "..") || strings.Contains(s, "@{") || strings.HasSuffix(s, ".lock") ||
		strings.HasSuffix(s, "/") || strings.HasSuffix(s, ".")
	for _, r := range s {
		if r < 0x20 {
			bad = true
		}
	}
	if strings.Count(s, ":") > 1 {
		bad = true
	}
	if bad {
		return fmt.Errorf("%s %q is not a valid branch name", name, cutArg(s))
	}
	return nil
}

func intArg(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || n > math.MaxInt32 || n < math.MinInt32 {
			return 0, false
		}
		return int(n), true
	case int:
		return n, true
	case int64:
		if n > math.MaxInt32 || n < math.MinInt32 {
			return 0, false
		}
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			return 0, false
		}
		return int(i), true
	}
	return 0, false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func cutArg(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.ToValidUTF8(s, "")
}
