package git

import (
	"ironcurtain.dev/gateway/internal/servers/toolargs"
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

func str(name, desc string, roles ...policy.Role) toolargs.Arg {
	return toolargs.Arg{Name: name, Kind: toolargs.String, Desc: desc, Roles: static(roles)}
}

func req(a toolargs.Arg) toolargs.Arg { a.Required = true; return a }

func strs(name, desc string, roles ...policy.Role) toolargs.Arg {
	return toolargs.Arg{Name: name, Kind: toolargs.Strings, Desc: desc, Roles: static(roles)}
}

func boolean(name, desc string) toolargs.Arg {
	return toolargs.Arg{Name: name, Kind: toolargs.Bool, Desc: desc, Roles: policy.Static(rNone)}
}

func num(name, desc string, max int64) toolargs.Arg {
	return toolargs.Arg{Name: name, Kind: toolargs.Int, Max: max, Desc: desc, Roles: policy.Static(rNone)}
}

func enum(name, desc string, values ...string) toolargs.Arg {
	return toolargs.Arg{Name: name, Kind: toolargs.String, Enum: values, Desc: desc, Roles: policy.Static(rNone)}
}

func static(roles []policy.Role) policy.ArgSpec {
	if len(roles) == 0 {
		return policy.Static(rNone)
	}
	return policy.Static(roles...)
}

// repoPath is the "path" argument of a tool with the given roles.
func repoPath(roles ...policy.Role) toolargs.Arg {
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
var toolDefs = []toolargs.Tool[*Server]{
	{Name: "status", Comment: "Shows the working tree status.", Desc: "Show the working tree status (staged, unstaged and untracked files).",
		Args: []toolargs.Arg{repoPath(rRead), boolean("short", "Short format with the branch line.")},
		Run:  (*Server).status},
	{Name: "diff", Comment: "Shows changes between the work tree, the index and commits.",
		Desc: "Show changes: work tree vs index (default), index vs base (staged), or between base and target. No external diff or textconv program ever runs.",
		Args: []toolargs.Arg{repoPath(rRead), boolean("staged", "Compare the index with base (default HEAD)."),
			str("base", "Revision to compare against."), str("target", "Second revision (needs base)."),
			strs("paths", "Limit to these absolute paths inside the repository.", rRead), boolean("stat", "Only a diffstat."),
			num("context_lines", "Lines of context.", 1000)},
		Run: (*Server).diff},
	{Name: "log", Comment: "Shows commit history.", Desc: "Show the commit history.",
		Args: []toolargs.Arg{repoPath(rRead), num("max_count", "Maximum commits (default 20).", 10000),
			str("revision", "Revision or range (e.g. main..feature)."), strs("paths", "Limit to these absolute paths.", rRead),
			boolean("oneline", "One line per commit."), boolean("stat", "Include a diffstat.")},
		Run: (*Server).logTool},
	{Name: "show", Comment: "Shows a commit, tag or file at a revision.", Desc: "Show a commit (with its diff), a tag, or a file at a revision (rev:path).",
		Args: []toolargs.Arg{repoPath(rRead), str("revision", "Object to show (default HEAD)."), boolean("stat", "Only a diffstat.")},
		Run:  (*Server).show},
	{Name: "blame", Comment: "Shows who last changed each line of a file.", Desc: "Show what revision and author last modified each line of a file.",
		Args: []toolargs.Arg{repoPath(rRead), req(str("file", "Absolute path of the file.", rRead)), str("revision", "Blame as of this revision."),
			num("start_line", "First line.", 1<<30), num("end_line", "Last line.", 1<<30)},
		Run: (*Server).blame},
	{Name: "add", Comment: "Stages files in the index.", Desc: "Stage files for the next commit.",
		Args: []toolargs.Arg{repoPath(rWrite), strs("files", "Absolute paths to stage.", rRead), boolean("all", "Stage every change, including removals and untracked files.")},
		Run:  (*Server).add},
	{Name: "commit", Comment: "Records staged changes as a commit; amend rewrites the last commit.", Desc: "Commit the staged changes.",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: policy.ArgSpec{Default: roles(rWrite, rWHist), When: []policy.ConditionalRoles{{
					Condition: policy.ArgCondition{Arg: "amend", Is: "falsy"}, Roles: roles(rWrite)}}}},
			req(str("message", "Commit message.", rMsg)), boolean("all", "Stage modified and deleted tracked files first."),
			boolean("amend", "Replace the last commit (rewrites history)."), boolean("allow_empty", "Allow a commit without changes.")},
		Run: (*Server).commit},
	{Name: "branch", Comment: "Lists, creates, deletes or renames branches.", Desc: "List, create, delete or rename branches.",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: byOp(roles(rRead, rWrite, rDHist), roles(rRead), on(roles(rRead), "list"), on(roles(rWrite), "create"),
					on(roles(rDHist), "delete"), on(roles(rWrite, rDHist), "rename"))},
			enum("operation", "list (default), create, delete or rename.", "list", "create", "delete", "rename"),
			str("name", "Branch to create, delete or rename.", rBranch), str("new_name", "New name (rename).", rBranch),
			str("start_point", "Where a new branch starts (default HEAD)."), boolean("force", "Delete even if not merged."),
			boolean("all", "List remote-tracking branches too.")},
		Run: (*Server).branch},
	{Name: "checkout", Comment: "Switches branches or restores work tree files.",
		Desc: "Switch to a branch (or commit with detach), create one with create_branch, or restore paths from target (default the index).",
		Args: []toolargs.Arg{repoPath(rWrite), str("target", "Branch or revision.", rBranch), boolean("create_branch", "Create target as a new branch."),
			str("start_point", "Start of the new branch."), boolean("detach", "Check out a commit with a detached HEAD."),
			strs("paths", "Restore these absolute paths (discards their work tree changes).", rWrite)},
		Run: (*Server).checkout},
	{Name: "merge", Comment: "Merges a branch into the current branch.", Desc: "Merge a branch into the current branch.",
		Args: []toolargs.Arg{repoPath(rWHist), str("branch", "Branch or revision to merge.", rBranch), str("message", "Merge commit message.", rMsg),
			boolean("no_ff", "Always create a merge commit."), boolean("ff_only", "Only fast-forward."), sequencer},
		Run: (*Server).merge},
	{Name: "rebase", Comment: "Reapplies commits on top of another base (rewrites history).", Desc: "Rebase the current branch onto upstream (never interactive).",
		Args: []toolargs.Arg{repoPath(rWHist), str("upstream", "Upstream revision.", rBranch), str("onto", "New base.", rBranch), sequencer},
		Run:  (*Server).rebase},
	{Name: "cherry_pick", Comment: "Applies existing commits onto the current branch.", Desc: "Apply the changes of existing commits.",
		Args: []toolargs.Arg{repoPath(rWHist), strs("commits", "Commits to apply, in order."), sequencer},
		Run:  (*Server).cherryPick},
	{Name: "reset", Comment: "Moves the current branch; hard discards work tree changes.", Desc: "Reset the current branch to target (soft, mixed or hard) or unstage paths.",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: policy.ArgSpec{Default: roles(rWHist, rDelete), When: []policy.ConditionalRoles{
					{Condition: policy.ArgCondition{Arg: "mode", Is: "absent"}, Roles: roles(rWHist)},
					{Condition: policy.ArgCondition{Arg: "mode", In: []any{"soft", "mixed"}}, Roles: roles(rWHist)}}}},
			enum("mode", "soft, mixed (default) or hard.", "soft", "mixed", "hard"), str("target", "Revision (default HEAD)."),
			strs("paths", "Unstage these absolute paths instead.", rRead)},
		Run: (*Server).reset},
	{Name: "stash", Comment: "Saves, lists, applies or drops stashed changes.", Desc: "Stash changes away (push) or list, show, apply, pop, drop or clear stashes.",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: byOp(roles(rRead, rWrite, rDHist), roles(rWrite), on(roles(rRead), "list", "show"),
					on(roles(rWrite), "push", "apply", "pop"), on(roles(rDHist), "drop", "clear"))},
			enum("operation", "push (default), list, show, apply, pop, drop or clear.", "push", "list", "show", "apply", "pop", "drop", "clear"),
			str("message", "Stash message (push).", rMsg), num("index", "Stash entry (default 0).", 100000),
			boolean("include_untracked", "Stash untracked files too (push).")},
		Run: (*Server).stash},
	{Name: "tag", Comment: "Lists, creates or deletes tags.", Desc: "List, create (annotated with message) or delete tags.",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: byOp(roles(rRead, rWrite, rDHist), roles(rRead), on(roles(rRead), "list"), on(roles(rWrite), "create"), on(roles(rDHist), "delete"))},
			enum("operation", "list (default), create or delete.", "list", "create", "delete"), str("name", "Tag name."),
			str("target", "Revision to tag (default HEAD)."), str("message", "Message of an annotated tag.", rMsg)},
		Run: (*Server).tag},
	{Name: "remote", Comment: "Lists, adds, removes remotes or shows their URLs.", Desc: "List remotes, add or remove one, or show its fetch and push URLs.",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: byOp(roles(rRead, rWrite), roles(rRead), on(roles(rRead), "list", "get_url"), on(roles(rWrite), "add", "remove"))},
			enum("operation", "list (default), add, remove or get_url.", "list", "add", "remove", "get_url"),
			str("name", "Remote name."), str("url", "URL of a new remote (https or ssh).", rRemote)},
		Run: (*Server).remote},
	{Name: "fetch", Comment: "Downloads objects and refs from a remote.", Desc: "Fetch from a remote (name, URL, or the default remote) into remote-tracking branches.",
		Args: []toolargs.Arg{repoPath(rWrite), str("remote", "Remote name or URL (default: the branch's remote, then origin).", rRemote),
			str("branch", "Only this branch (required with a URL).", rBranch), boolean("tags", "Fetch tags too."), boolean("prune", "Remove remote-tracking branches that no longer exist.")},
		Run: (*Server).fetch},
	{Name: "pull", Comment: "Fetches from a remote and merges or rebases.", Desc: "Fetch a branch from a remote and merge it (or rebase onto it).",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: policy.ArgSpec{Default: roles(rWrite, rWHist), When: []policy.ConditionalRoles{{
					Condition: policy.ArgCondition{Arg: "rebase", Is: "falsy"}, Roles: roles(rWrite)}}}},
			str("remote", "Remote name or URL (default: the branch's remote, then origin).", rRemote),
			str("branch", "Remote branch (default: the upstream of the current branch).", rBranch),
			boolean("rebase", "Rebase instead of merging (rewrites history)."), boolean("ff_only", "Only fast-forward.")},
		Run: (*Server).pull},
	{Name: "push", Comment: "Updates remote refs; force, deletion, mirror and protected-branch pushes are refused.",
		Desc: "Push a branch (or refspecs) to a remote. Force pushes, deletions and pushes to protected branches are refused.",
		Args: []toolargs.Arg{repoPath(rRead),
			str("remote", "Remote name or URL (default: the branch's push remote, then origin).", rRemote),
			str("branch", "Local branch or refspec src[:dst] (default: the current branch).", rBranch),
			str("remote_branch", "Destination branch name.", rBranch), strs("refspecs", "More refspecs src:dst."),
			boolean("force", "Refused: force pushes are not allowed."), boolean("force_with_lease", "Refused: force pushes are not allowed."),
			boolean("tags", "Push tags too."), boolean("set_upstream", "Record the remote branch as upstream.")},
		Run: (*Server).pushTool},
	{Name: "clone", Comment: "Copies a remote repository into a new directory.", Desc: "Clone a repository (https or ssh) into a new directory in the sandbox. Submodules are not cloned.",
		Args: []toolargs.Arg{req(str("url", "Repository URL.", rRemote)), req(str("path", "Absolute path of the new directory.", rWrite)),
			str("branch", "Branch to check out (default: the remote's default).", rBranch)},
		Run: (*Server).clone},
	{Name: "init", Comment: "Creates an empty repository.", Desc: "Create an empty repository (the directory is created if missing).",
		Args: []toolargs.Arg{req(str("path", "Absolute path of the directory.", rWrite)), str("initial_branch", "Name of the first branch.", rBranch)},
		Run:  (*Server).initRepo},
	{Name: "worktree", Comment: "Lists, adds, removes or prunes linked worktrees.", Desc: "Manage linked worktrees (list, add, remove, prune).",
		Args: []toolargs.Arg{
			{Name: "path", Kind: toolargs.String, Required: true, Desc: "Absolute path of the repository.",
				Roles: byOp(roles(rRead, rWrite, rDelete), roles(rRead), on(roles(rRead), "list"), on(roles(rWrite), "add", "prune"), on(roles(rDelete), "remove"))},
			enum("operation", "list (default), add, remove or prune.", "list", "add", "remove", "prune"),
			{Name: "worktree_path", Kind: toolargs.String, Desc: "Absolute path of the worktree (add, remove).",
				Roles: byOp(roles(rWrite, rDelete), roles(rRead), on(roles(rWrite), "add"), on(roles(rDelete), "remove"))},
			str("branch", "Branch to check out in the new worktree.", rBranch), boolean("create_branch", "Create branch."),
			str("start_point", "Start of the new branch.")},
		Run: (*Server).worktree},
}
