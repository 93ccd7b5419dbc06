package policy

// The argument roles of the original registry. Roles are plain strings in
// the artifacts; these constants name them in code.
const (
	RoleReadPath        Role = "read-path"
	RoleWritePath       Role = "write-path"
	RoleDeletePath      Role = "delete-path"
	RoleWriteHistory    Role = "write-history"
	RoleDeleteHistory   Role = "delete-history"
	RoleFetchURL        Role = "fetch-url"
	RoleGitRemoteURL    Role = "git-remote-url"
	RoleGitHubOwner     Role = "github-owner"
	RoleGitHubRepo      Role = "github-repo"
	RoleProxyDomain     Role = "proxy-domain"
	RoleBranchName      Role = "branch-name"
	RoleCommitMessage   Role = "commit-message"
	RoleEmailAddress    Role = "email-address"
	RoleEmailBody       Role = "email-body"
	RoleSharePermission Role = "share-permission"
	RoleNone            Role = "none"
)

// Canonicalisation names how the engine canonicalises a value of a role
// before the policy sees it.
type Canonicalisation string

const (
	// CanonRealpath: tilde expansion from $HOME, relative paths against the
	// sandbox, symlink-aware realpath with an ancestor walk for new paths.
	CanonRealpath Canonicalisation = "realpath"
	// CanonURL: strict URL parse, host IDNA/lower-case, domain = host.
	CanonURL Canonicalisation = "url"
	// CanonGitRemote: named remotes resolved with git; scp, ssh and https
	// remotes parsed strictly; domain = host[/owner/repo].
	CanonGitRemote Canonicalisation = "git-remote"
	// CanonLowercase: the value is lower-cased.
	CanonLowercase Canonicalisation = "lowercase"
	// CanonIdentity: the value is used as given.
	CanonIdentity Canonicalisation = "identity"
)

// RoleDefinition describes one role: its structural category, whether it
// names a resource (only resource roles are evaluated per role by the
// compiled rules), how values are canonicalised, and the text the compiler
// puts in its annotation prompt.
type RoleDefinition struct {
	Role               Role
	Category           Category
	ResourceIdentifier bool
	// SandboxSafe: sandbox containment resolves the role by default
	// (DefaultSandboxSafeRoles). Settings.SandboxSafeRoles overrides it;
	// any path role may be listed there.
	SandboxSafe          bool
	Canonicalisation     Canonicalisation
	Description          string
	AnnotationGuidance   string
	Servers              []string // servers the role is meant for; nil: every server
	destructivePathWrite bool     // writes or deletes (in-sandbox protected files apply)
}

var roleList = []RoleDefinition{
	{Role: RoleReadPath, Category: CategoryPath, ResourceIdentifier: true, SandboxSafe: true, Canonicalisation: CanonRealpath,
		Description:        "Filesystem path that will be read",
		AnnotationGuidance: "Assign to arguments that are filesystem paths the tool will read from. Includes file and directory paths used for input.",
		Servers:            []string{"filesystem", "git"}},
	{Role: RoleWritePath, Category: CategoryPath, ResourceIdentifier: true, SandboxSafe: true, Canonicalisation: CanonRealpath, destructivePathWrite: true,
		Description:        "Filesystem path that will be written to",
		AnnotationGuidance: "Assign to arguments that are filesystem paths the tool will write or create. Includes destination paths for file creation and modification.",
		Servers:            []string{"filesystem", "git"}},
	{Role: RoleDeletePath, Category: CategoryPath, ResourceIdentifier: true, Canonicalisation: CanonRealpath, destructivePathWrite: true,
		Description:        "Filesystem path that will be deleted",
		AnnotationGuidance: "Assign to arguments that are filesystem paths the tool will delete or remove. Also assign to the source argument of move operations (source is deleted after copy).",
		Servers:            []string{"filesystem", "git"}},
	{Role: RoleWriteHistory, Category: CategoryPath, ResourceIdentifier: true, Canonicalisation: CanonRealpath, destructivePathWrite: true,
		Description:        "Filesystem path where git history will be rewritten",
		AnnotationGuidance: "Assign to the repository path argument of git operations that rewrite history or modify refs. Includes git_reset, git_rebase, git_merge, git_cherry_pick, and similar operations. These operations are dangerous even within the sandbox and require human oversight.",
		Servers:            []string{"git"}},
	{Role: RoleDeleteHistory, Category: CategoryPath, ResourceIdentifier: true, Canonicalisation: CanonRealpath, destructivePathWrite: true,
		Description:        "Filesystem path where git refs or history will be deleted",
		AnnotationGuidance: "Assign to the repository path argument of git operations that delete refs (branches, tags). Includes git_branch (delete mode), git_tag (delete mode), and similar operations. These operations are dangerous even within the sandbox and require human oversight.",
		Servers:            []string{"git"}},
	{Role: RoleFetchURL, Category: CategoryURL, ResourceIdentifier: true, Canonicalisation: CanonURL,
		Description:        "URL that will be fetched via HTTP(S)",
		AnnotationGuidance: "Assign to arguments that are HTTP(S) URLs the tool will fetch. Typically applies to web-fetch server tools.",
		Servers:            []string{"fetch"}},
	{Role: RoleGitRemoteURL, Category: CategoryURL, ResourceIdentifier: true, Canonicalisation: CanonGitRemote,
		Description:        "Git remote URL or named remote for network operations",
		AnnotationGuidance: "Assign to arguments that identify a git remote (URL or named remote like \"origin\"). Typically applies to git server tools like git_clone, git_push, git_pull, git_fetch, git_remote.",
		Servers:            []string{"git"}},
	{Role: RoleGitHubOwner, Category: CategoryIdentifier, ResourceIdentifier: true, Canonicalisation: CanonLowercase,
		Description:        "GitHub user or organization name that owns the target resource",
		AnnotationGuidance: "Assign to arguments that identify a GitHub user or organization that owns the target resource. Typically the \"owner\" or \"org\" parameter on GitHub API tools.",
		Servers:            []string{"github"}},
	{Role: RoleGitHubRepo, Category: CategoryIdentifier, ResourceIdentifier: true, Canonicalisation: CanonLowercase,
		Description:        "GitHub repository name (without owner prefix)",
		AnnotationGuidance: "Assign to arguments that identify a GitHub repository name (without the owner prefix). Typically the \"repo\" parameter on GitHub API tools. Always pair with the corresponding github-owner argument.",
		Servers:            []string{"github"}},
	{Role: RoleProxyDomain, Category: CategoryIdentifier, ResourceIdentifier: true, Canonicalisation: CanonLowercase,
		Description:        "Domain name for proxy allowlist management",
		AnnotationGuidance: "Assign to arguments that are domain names used for proxy allowlist management. Typically the \"domain\" parameter on proxy domain management tools.",
		Servers:            []string{"proxy"}},
	{Role: RoleBranchName, Category: CategoryOpaque, Canonicalisation: CanonIdentity,
		Description:        "Git branch name",
		AnnotationGuidance: "Assign to arguments that are git branch names. Typically applies to git server tools like git_branch, git_checkout, git_merge, git_push, and GitHub tools like create_pull_request (head/base branch arguments).",
		Servers:            []string{"git", "github"}},
	{Role: RoleCommitMessage, Category: CategoryOpaque, Canonicalisation: CanonIdentity,
		Description:        "Git commit message text",
		AnnotationGuidance: "Assign to arguments that are git commit messages. Typically applies to git_commit.",
		Servers:            []string{"git"}},
	{Role: RoleEmailAddress, Category: CategoryOpaque, Canonicalisation: CanonIdentity,
		Description:        "Email address (recipient, attendee, share target)",
		AnnotationGuidance: "Assign to arguments that are email addresses (recipients, attendees, share targets). Includes the \"to\" field on send/draft, \"attendees\" on calendar events, \"email\" on file sharing.",
		Servers:            []string{"google-workspace"}},
	{Role: RoleEmailBody, Category: CategoryOpaque, Canonicalisation: CanonIdentity,
		Description:        "Email message body content",
		AnnotationGuidance: "Assign to arguments that contain email body text or rich content. Includes the \"body\" field on send/draft message tools.",
		Servers:            []string{"google-workspace"}},
	{Role: RoleSharePermission, Category: CategoryOpaque, Canonicalisation: CanonLowercase,
		Description:        "Sharing permission level (viewer, commenter, editor, organizer)",
		AnnotationGuidance: "Assign to arguments that specify a sharing or permission level on shared resources (e.g., the role parameter on Drive file sharing).",
		Servers:            []string{"google-workspace"}},
	{Role: RoleNone, Category: CategoryOpaque, Canonicalisation: CanonIdentity,
		Description:        "Argument carries no resource-identifier semantics",
		AnnotationGuidance: "Assign to arguments that have no resource-identifier semantics. Use for flags, counts, patterns, messages, and other non-path, non-URL values."},
}

// roleIndex maps a role to its position in roleList; it doubles as a dense
// small integer for bitsets in the evaluator.
var roleIndex = func() map[Role]int {
	m := make(map[Role]int, len(roleList))
	for i, d := range roleList {
		m[d.Role] = i
	}
	return m
}()

// roleSlots index roleList by a role's length and first byte (each modulo 32),
// holding position+1 (0: none): the evaluator looks roles up several times per
// call, and a slot and one string comparison cost a fraction of a map lookup.
// roleSlotsOK is false if two registered roles share a slot; roleIdx then
// uses roleIndex.
var roleSlots, roleSlotsOK = func() (t [32][32]int8, ok bool) {
	for i, d := range roleList {
		r := d.Role
		if r == "" || i >= 127 {
			return t, false
		}
		s := &t[len(r)&31][r[0]&31]
		if *s != 0 {
			return t, false
		}
		*s = int8(i + 1)
	}
	return t, true
}()

// roleIdx returns r's position in roleList.
func roleIdx(r Role) (int, bool) {
	if !roleSlotsOK {
		i, ok := roleIndex[r]
		return i, ok
	}
	if r == "" {
		return 0, false
	}
	i := int(roleSlots[len(r)&31][r[0]&31]) - 1
	if i < 0 || roleList[i].Role != r {
		return 0, false
	}
	return i, true
}

// Roles returns every registered role definition in registry order. The
// compiler builds its annotation prompt from these.
func Roles() []RoleDefinition {
	out := make([]RoleDefinition, len(roleList))
	copy(out, roleList)
	for i := range out {
		out[i].Servers = append([]string(nil), out[i].Servers...)
	}
	return out
}

// LookupRole returns the definition of r.
func LookupRole(r Role) (RoleDefinition, bool) {
	i, ok := roleIdx(r)
	if !ok {
		return RoleDefinition{}, false
	}
	return roleList[i], true
}

// IsRole reports whether r is a registered role.
func IsRole(r Role) bool { _, ok := roleIdx(r); return ok }

// RolesByCategory returns the roles of category c in registry order.
func RolesByCategory(c Category) []Role {
	var out []Role
	for _, d := range roleList {
		if d.Category == c {
			out = append(out, d.Role)
		}
	}
	return out
}

// RolesForServer returns the roles meant for server (roles without a server
// list are meant for every server), in registry order.
func RolesForServer(server string) []RoleDefinition {
	var out []RoleDefinition
	for _, d := range Roles() {
		if len(d.Servers) == 0 || contains(d.Servers, server) {
			out = append(out, d)
		}
	}
	return out
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func roleDef(r Role) *RoleDefinition {
	if i, ok := roleIdx(r); ok {
		return &roleList[i]
	}
	return nil
}

// roleSet is a bitset over registered roles.
type roleSet uint32

func (s roleSet) has(r Role) bool {
	i, ok := roleIdx(r)
	return ok && s&(1<<uint(i)) != 0
}

func (s *roleSet) add(r Role) {
	if i, ok := roleIdx(r); ok {
		*s |= 1 << uint(i)
	}
}

func setOf(rs []Role) roleSet {
	var s roleSet
	for _, r := range rs {
		s.add(r)
	}
	return s
}
