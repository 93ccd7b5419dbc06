package git

import (
	"encoding/json"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// Roles, shortened for the table below.
const (
	rRead   = policy.RoleReadPath
	rWrite  = policy.RoleWritePath
	rDelete = policy.RoleDeletePath
	rWHist  = policy.RoleWriteHistory
	rDHist  = policy.RoleDeleteHistory
	rRemote = policy.RoleGitRemoteURL
	rBranch = policy.RoleBranchName
	rMsg    = policy.RoleCommitMessage
	rNone   = policy.RoleNone
)

// param declares one argument: its check, schema text and roles.
type param struct {
	spec  argSpec
	desc  string
	roles policy.ArgSpec
}

type toolDef struct {
	name    string
	desc    string
	comment string
	params  []param
	run     func(*Server) handler
}

func str(name, desc string, roles ...policy.Role) param {
	return param{spec: argSpec{name: name, kind: kindString}, desc: desc, roles: static(roles)}
}

func req(p param) param { p.spec.required = true; return p }

func strs(name, desc string, roles ...policy.Role) param {
	return param{spec: argSpec{name: name, kind: kindStrings}, desc: desc, roles: static(roles)}
}

func boolean(name, desc string) param {
	return param{spec: argSpec{name: name, kind: kindBool}, desc: desc, roles: policy.Static(rNone)}
}

func num(name, desc string, max int64) param {
	return param{spec: argSpec{name: name, kind: kindInt, max: max}, desc: desc, roles: policy.Static(rNone)}
}

func enum(name, desc string, values ...string) param {
	return param{spec: argSpec{name: name, kind: kindString, enum: values}, desc: desc, roles: policy.Static(rNone)}
}

func static(roles []policy.Role) policy.ArgSpec {
	if len(roles) == 0 {
		return policy.Static(rNone)
	}
	return policy.Static(roles...)
}

// repoPath is the "path" argument of a tool with the given roles.
func repoPath(roles ...policy.Role) param {
	return req(str("path", "Absolute path of the repository (or a directory inside it).", roles...))
}

// byOp returns a conditional role spec keyed on the "operation" argument:
// cases map operation values to roles; absent gives the roles of the
// default operation. def lists every role any case uses (the invariant of
// conditional specs: each case's roles are a subset of the default).
func byOp(def []policy.Role, absent []policy.Role, cases ...opRoles) policy.ArgSpec {
	spec := policy.ArgSpec{Default: def}
	spec.When = append(spec.When, policy.ConditionalRoles{
		Condition: policy.ArgCondition{Arg: "operation", Is: "absent"}, Roles: absent})
	for _, c := range cases {
		in := make([]any, len(c.ops))
		for i, o := range c.ops {
			in[i] = o
		}
		spec.When = append(spec.When, policy.ConditionalRoles{
			Condition: policy.ArgCondition{Arg: "operation", In: in}, Roles: c.roles})
	}
	return spec
}

type opRoles struct {
	ops   []string
	roles []policy.Role
}

func on(roles []policy.Role, ops ...string) opRoles { return opRoles{ops: ops, roles: roles} }

func roles(r ...policy.Role) []policy.Role { return r }

var sequencer = enum("operation", "Continue, abort or skip an operation in progress instead of starting one.", "continue", "abort", "skip", "quit")

// toolDefs is the server's tool set.
var toolDefs = []toolDef{
	{name: "status", comment: "Shows the working tree status.", desc: "Show the working tree status (staged, unstaged and untracked files).",
		params: []param{repoPath(rRead), boolean("short", "Short format with the branch line.")},
		run:    func(s *Server) handler { return s.status }},
	{name: "diff", comment: "Shows changes between the work tree, the index and commits.",
		desc: "Show changes: work tree vs index (default), index vs base (staged), or between base and target. No external diff or textconv program ever runs.",
		params: []param{repoPath(rRead), boolean("staged", "Compare the index with base (default HEAD)."),
			str("base", "Revision to compare against."), str("target", "Second revision (needs base)."),
			strs("paths", "Limit to these absolute paths inside the repository.", rRead), boolean("stat", "Only a diffstat."),
			num("context_lines", "Lines of context.", 1000)},
		run: func(s *Server) handler { return s.diff }},
	{name: "log", comment: "Shows commit history.", desc: "Show the commit history.",
		params: []param{repoPath(rRead), num("max_count", "Maximum commits (default 20).", 10000),
			str("revision", "Revision or range (e.g. main..feature)."), strs("paths", "Limit to these absolute paths.", rRead),
			boolean("oneline", "One line per commit."), boolean("stat", "Include a diffstat.")},
		run: func(s *Server) handler { return s.logTool }},
	{name: "show", comment: "Shows a commit, tag or file at a revision.", desc: "Show a commit (with its diff), a tag, or a file at a revision (rev:path).",
		params: []param{repoPath(rRead), str("revision", "Object to show (default HEAD)."), boolean("stat", "Only a diffstat.")},
		run:    func(s *Server) handler { return s.show }},
	{name: "blame", comment: "Shows who last changed each line of a file.", desc: "Show what revision and author last modified each line of a file.",
		params: []param{repoPath(rRead), req(str("file", "Absolute path of the file.", rRead)), str("revision", "Blame as of this revision."),
			num("start_line", "First line.", 1<<30), num("end_line", "Last line.", 1<<30)},
		run: func(s *Server) handler { return s.blame }},
	{name: "add", comment: "Stages files in the index.", desc: "Stage files for the next commit.",
		params: []param{repoPath(rWrite), strs("files", "Absolute paths to stage.", rRead), boolean("all", "Stage every change, including removals and untracked files.")},
		run:    func(s *Server) handler { return s.add }},
	{name: "commit", comment: "Records staged changes as a commit; amend rewrites the last commit.", desc: "Commit the staged changes.",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: policy.ArgSpec{Default: roles(rWrite, rWHist), When: []policy.ConditionalRoles{{
					Condition: policy.ArgCondition{Arg: "amend", Is: "falsy"}, Roles: roles(rWrite)}}}},
			req(str("message", "Commit message.", rMsg)), boolean("all", "Stage modified and deleted tracked files first."),
			boolean("amend", "Replace the last commit (rewrites history)."), boolean("allow_empty", "Allow a commit without changes.")},
		run: func(s *Server) handler { return s.commit }},
	{name: "branch", comment: "Lists, creates, deletes or renames branches.", desc: "List, create, delete or rename branches.",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: byOp(roles(rRead, rWrite, rDHist), roles(rRead), on(roles(rRead), "list"), on(roles(rWrite), "create"),
					on(roles(rDHist), "delete"), on(roles(rWrite, rDHist), "rename"))},
			enum("operation", "list (default), create, delete or rename.", "list", "create", "delete", "rename"),
			str("name", "Branch to create, delete or rename.", rBranch), str("new_name", "New name (rename).", rBranch),
			str("start_point", "Where a new branch starts (default HEAD)."), boolean("force", "Delete even if not merged."),
			boolean("all", "List remote-tracking branches too.")},
		run: func(s *Server) handler { return s.branch }},
	{name: "checkout", comment: "Switches branches or restores work tree files.",
		desc: "Switch to a branch (or commit with detach), create one with create_branch, or restore paths from target (default the index).",
		params: []param{repoPath(rWrite), str("target", "Branch or revision.", rBranch), boolean("create_branch", "Create target as a new branch."),
			str("start_point", "Start of the new branch."), boolean("detach", "Check out a commit with a detached HEAD."),
			strs("paths", "Restore these absolute paths (discards their work tree changes).", rWrite)},
		run: func(s *Server) handler { return s.checkout }},
	{name: "merge", comment: "Merges a branch into the current branch.", desc: "Merge a branch into the current branch.",
		params: []param{repoPath(rWHist), str("branch", "Branch or revision to merge.", rBranch), str("message", "Merge commit message.", rMsg),
			boolean("no_ff", "Always create a merge commit."), boolean("ff_only", "Only fast-forward."), sequencer},
		run: func(s *Server) handler { return s.merge }},
	{name: "rebase", comment: "Reapplies commits on top of another base (rewrites history).", desc: "Rebase the current branch onto upstream (never interactive).",
		params: []param{repoPath(rWHist), str("upstream", "Upstream revision.", rBranch), str("onto", "New base.", rBranch), sequencer},
		run:    func(s *Server) handler { return s.rebase }},
	{name: "cherry_pick", comment: "Applies existing commits onto the current branch.", desc: "Apply the changes of existing commits.",
		params: []param{repoPath(rWHist), strs("commits", "Commits to apply, in order."), sequencer},
		run:    func(s *Server) handler { return s.cherryPick }},
	{name: "reset", comment: "Moves the current branch; hard discards work tree changes.", desc: "Reset the current branch to target (soft, mixed or hard) or unstage paths.",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: policy.ArgSpec{Default: roles(rWHist, rDelete), When: []policy.ConditionalRoles{
					{Condition: policy.ArgCondition{Arg: "mode", Is: "absent"}, Roles: roles(rWHist)},
					{Condition: policy.ArgCondition{Arg: "mode", In: []any{"soft", "mixed"}}, Roles: roles(rWHist)}}}},
			enum("mode", "soft, mixed (default) or hard.", "soft", "mixed", "hard"), str("target", "Revision (default HEAD)."),
			strs("paths", "Unstage these absolute paths instead.", rRead)},
		run: func(s *Server) handler { return s.reset }},
	{name: "stash", comment: "Saves, lists, applies or drops stashed changes.", desc: "Stash changes away (push) or list, show, apply, pop, drop or clear stashes.",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: byOp(roles(rRead, rWrite, rDHist), roles(rWrite), on(roles(rRead), "list", "show"),
					on(roles(rWrite), "push", "apply", "pop"), on(roles(rDHist), "drop", "clear"))},
			enum("operation", "push (default), list, show, apply, pop, drop or clear.", "push", "list", "show", "apply", "pop", "drop", "clear"),
			str("message", "Stash message (push).", rMsg), num("index", "Stash entry (default 0).", 100000),
			boolean("include_untracked", "Stash untracked files too (push).")},
		run: func(s *Server) handler { return s.stash }},
	{name: "tag", comment: "Lists, creates or deletes tags.", desc: "List, create (annotated with message) or delete tags.",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: byOp(roles(rRead, rWrite, rDHist), roles(rRead), on(roles(rRead), "list"), on(roles(rWrite), "create"), on(roles(rDHist), "delete"))},
			enum("operation", "list (default), create or delete.", "list", "create", "delete"), str("name", "Tag name."),
			str("target", "Revision to tag (default HEAD)."), str("message", "Message of an annotated tag.", rMsg)},
		run: func(s *Server) handler { return s.tag }},
	{name: "remote", comment: "Lists, adds, removes remotes or shows their URLs.", desc: "List remotes, add or remove one, or show its fetch and push URLs.",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: byOp(roles(rRead, rWrite), roles(rRead), on(roles(rRead), "list", "get_url"), on(roles(rWrite), "add", "remove"))},
			enum("operation", "list (default), add, remove or get_url.", "list", "add", "remove", "get_url"),
			str("name", "Remote name."), str("url", "URL of a new remote (https or ssh).", rRemote)},
		run: func(s *Server) handler { return s.remote }},
	{name: "fetch", comment: "Downloads objects and refs from a remote.", desc: "Fetch from a remote (name, URL, or the default remote) into remote-tracking branches.",
		params: []param{repoPath(rWrite), str("remote", "Remote name or URL (default: the branch's remote, then origin).", rRemote),
			str("branch", "Only this branch (required with a URL).", rBranch), boolean("tags", "Fetch tags too."), boolean("prune", "Remove remote-tracking branches that no longer exist.")},
		run: func(s *Server) handler { return s.fetch }},
	{name: "pull", comment: "Fetches from a remote and merges or rebases.", desc: "Fetch a branch from a remote and merge it (or rebase onto it).",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: policy.ArgSpec{Default: roles(rWrite, rWHist), When: []policy.ConditionalRoles{{
					Condition: policy.ArgCondition{Arg: "rebase", Is: "falsy"}, Roles: roles(rWrite)}}}},
			str("remote", "Remote name or URL (default: the branch's remote, then origin).", rRemote),
			str("branch", "Remote branch (default: the upstream of the current branch).", rBranch),
			boolean("rebase", "Rebase instead of merging (rewrites history)."), boolean("ff_only", "Only fast-forward.")},
		run: func(s *Server) handler { return s.pull }},
	{name: "push", comment: "Updates remote refs; force, deletion, mirror and protected-branch pushes are refused.",
		desc: "Push a branch (or refspecs) to a remote. Force pushes, deletions and pushes to protected branches are refused.",
		params: []param{repoPath(rRead),
			str("remote", "Remote name or URL (default: the branch's push remote, then origin).", rRemote),
			str("branch", "Local branch or refspec src[:dst] (default: the current branch).", rBranch),
			str("remote_branch", "Destination branch name.", rBranch), strs("refspecs", "More refspecs src:dst."),
			boolean("force", "Refused: force pushes are not allowed."), boolean("force_with_lease", "Refused: force pushes are not allowed."),
			boolean("tags", "Push tags too."), boolean("set_upstream", "Record the remote branch as upstream.")},
		run: func(s *Server) handler { return s.pushTool }},
	{name: "clone", comment: "Copies a remote repository into a new directory.", desc: "Clone a repository (https or ssh) into a new directory in the sandbox. Submodules are not cloned.",
		params: []param{req(str("url", "Repository URL.", rRemote)), req(str("path", "Absolute path of the new directory.", rWrite)),
			str("branch", "Branch to check out (default: the remote's default).", rBranch)},
		run: func(s *Server) handler { return s.clone }},
	{name: "init", comment: "Creates an empty repository.", desc: "Create an empty repository (the directory is created if missing).",
		params: []param{req(str("path", "Absolute path of the directory.", rWrite)), str("initial_branch", "Name of the first branch.", rBranch)},
		run:    func(s *Server) handler { return s.initRepo }},
	{name: "worktree", comment: "Lists, adds, removes or prunes linked worktrees.", desc: "Manage linked worktrees (list, add, remove, prune).",
		params: []param{
			{spec: argSpec{name: "path", kind: kindString, required: true}, desc: "Absolute path of the repository.",
				roles: byOp(roles(rRead, rWrite, rDelete), roles(rRead), on(roles(rRead), "list"), on(roles(rWrite), "add", "prune"), on(roles(rDelete), "remove"))},
			enum("operation", "list (default), add, remove or prune.", "list", "add", "remove", "prune"),
			{spec: argSpec{name: "worktree_path", kind: kindString}, desc: "Absolute path of the worktree (add, remove).",
				roles: byOp(roles(rWrite, rDelete), roles(rRead), on(roles(rWrite), "add"), on(roles(rDelete), "remove"))},
			str("branch", "Branch to check out in the new worktree.", rBranch), boolean("create_branch", "Create branch."),
			str("start_point", "Start of the new branch.")},
		run: func(s *Server) handler { return s.worktree }},
}

// toolArgs maps each tool to its argument checks.
var toolArgs = func() map[string][]argSpec {
	m := make(map[string][]argSpec, len(toolDefs))
	for _, d := range toolDefs {
		specs := make([]argSpec, len(d.params))
		for i, p := range d.params {
			specs[i] = p.spec
		}
		m[d.name] = specs
	}
	return m
}()

// toolSet builds the public tool list and the handler table.
func (s *Server) toolSet() ([]servers.Tool, map[string]handler) {
	tools := make([]servers.Tool, 0, len(toolDefs))
	handlers := make(map[string]handler, len(toolDefs))
	for _, d := range toolDefs {
		schema := inputSchema(d.params)
		ann := policy.ToolAnnotation{Tool: d.name, Server: ServerName, Comment: d.comment,
			Args: make([]policy.ArgAnnotation, len(d.params)), InputSchema: schema}
		for i, p := range d.params {
			ann.Args[i] = policy.ArgAnnotation{Name: p.spec.name, Spec: p.roles}
		}
		tools = append(tools, servers.Tool{Name: d.name, Description: d.desc, InputSchema: schema, Annotation: ann})
		handlers[d.name] = d.run(s)
	}
	return tools, handlers
}

func inputSchema(params []param) json.RawMessage {
	props := make(map[string]any, len(params))
	required := []string{}
	for _, p := range params {
		var prop map[string]any
		switch p.spec.kind {
		case kindString:
			prop = map[string]any{"type": "string"}
			if len(p.spec.enum) > 0 {
				prop["enum"] = p.spec.enum
			}
		case kindStrings:
			prop = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
		case kindInt:
			prop = map[string]any{"type": "integer", "minimum": 0}
			if p.spec.max > 0 {
				prop["maximum"] = p.spec.max
			}
		case kindBool:
			prop = map[string]any{"type": "boolean"}
		}
		prop["description"] = p.desc
		props[p.spec.name] = prop
		if p.spec.required {
			required = append(required, p.spec.name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic("git: encoding input schema: " + err.Error()) // static data
	}
	return b
}
