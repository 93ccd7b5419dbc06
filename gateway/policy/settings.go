package policy

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// Settings are the deployment settings the engine needs besides the three
// artifacts (gateway.yaml provides them through config.PolicySettings).
type Settings struct {
	// Sandbox is the directory the agent works in (realpath computed once at
	// load). Relative paths in calls resolve against it.
	Sandbox string
	// ProtectedPaths are never read or written through a tool (unless they
	// contain the sandbox, which stays usable). Absolute or starting with ~.
	ProtectedPaths []string
	// ProtectedBranches may never be pushed to (names or one-'*' globs,
	// case-insensitive). Empty: DefaultProtectedBranches().
	ProtectedBranches []string
	// TrustedServers skip annotation, path, domain and rule checks (the git
	// push and PR-merge invariants still apply).
	TrustedServers []string
	// DomainAllowlists maps a server to the domains its URL-role arguments
	// may name without a human (others escalate).
	DomainAllowlists map[string][]string
	// Home expands ~ ("" : $HOME).
	Home string
	// Annotations declared in code by built-in servers. They replace the
	// annotations file's entry for the same server and tool.
	Annotations []ToolAnnotation
	// CatalogAnnotations come from the shipped catalog for external servers
	// configured with catalog: (gateway/catalog); each is used only when
	// neither Annotations nor the annotations files annotate that tool.
	CatalogAnnotations []ToolAnnotation
	// AnnotationsFile is read by LoadDir in addition to the policy
	// directory's tool-annotations.json (MergeAnnotations: a tool in both
	// is an error).
	AnnotationsFile string
	// ShadowPolicyDir, when set, is loaded by LoadDir as a report-only
	// second policy with the same settings.
	ShadowPolicyDir string
	// SandboxSafeRoles are the path roles that sandbox containment resolves:
	// on the filesystem and git servers, such a role whose values all lie in
	// the sandbox is allowed without consulting the compiled rules. Only
	// path-category roles, each at most once. nil means
	// DefaultSandboxSafeRoles (read-path, write-path), so deletes and history
	// rewrites in the sandbox reach the compiled rules; an empty non-nil
	// slice resolves nothing (every call reaches the rules);
	// OriginalSandboxSafeRoles reproduces the original IronCurtain.
	SandboxSafeRoles []Role
	// ReadOnlyDirs are directories outside the sandbox that the filesystem
	// server may read but never write (gateway.yaml:
	// servers.filesystem.read_only_dirs). Sandbox containment resolves a
	// filesystem read-path value in one of them like one in the sandbox
	// (when read-path is sandbox-safe); a value with any other path role
	// there is outside what the server can reach. Absolute or ~/...; none
	// may overlap the sandbox or be /.
	ReadOnlyDirs []string
	// ConfinedServers are the servers that can act only on paths inside the
	// sandbox (the filesystem server also reads ReadOnlyDirs): the gateway's
	// built-in filesystem and git servers. An allow or escalate of such a
	// server's call that names a path it cannot reach becomes a deny
	// (RuleUnreachablePath), since an approval could never make it run, and
	// LoadDir/New warn about rules that would decide so (Engine.Warnings).
	// nil: the engine assumes nothing about what servers reach (the
	// original's behaviour; the compiler's verification).
	ConfinedServers []string
	// Secrets configures secret scanning of what calls send out
	// (RuleSecretEgress); the zero value scans with the default detectors
	// and escalates.
	Secrets SecretScan
	// UnsafeAllowAddresses are the non-public address prefixes the egress
	// guard lets through (gateway.yaml: egress.unsafe_allow_addresses): a
	// URL naming such an address is not denied by RuleSpecialHost.
	UnsafeAllowAddresses []netip.Prefix
	// SessionSandboxRoot is the directory that holds the per-session
	// sandboxes of minted sessions (<root>/<session id>; gateway.yaml:
	// sessions.workspace_root). It is a protected path for every caller,
	// except that a session's view (Engine.ForSandbox) keeps its own
	// directory usable. It must not overlap Sandbox, which must be set.
	// "": no per-session sandboxes (Request.Sandbox is refused).
	SessionSandboxRoot string
}

// BuiltinConfinedServers returns the gateway's built-in servers that work
// only inside the sandbox (Settings.ConfinedServers).
func BuiltinConfinedServers() []string { return []string{"filesystem", "git"} }

// DefaultSandboxSafeRoles returns the roles sandbox containment resolves
// when Settings.SandboxSafeRoles is nil: reading and writing in the
// sandbox. Deleting (delete-path) and rewriting or deleting git history
// (write-history, delete-history) in the sandbox are left to the compiled
// rules.
func DefaultSandboxSafeRoles() []Role {
	return []Role{RoleReadPath, RoleWritePath}
}

// OriginalSandboxSafeRoles returns the original IronCurtain's sandbox-safe
// roles: every path role. With these, deletes and history rewrites inside
// the sandbox are allowed before the compiled rules are consulted.
func OriginalSandboxSafeRoles() []Role {
	return []Role{RoleReadPath, RoleWritePath, RoleDeletePath, RoleWriteHistory, RoleDeleteHistory}
}

// sandboxSafeRoles returns the effective setting.
func (s Settings) sandboxSafeRoles() []Role {
	if s.SandboxSafeRoles == nil {
		return DefaultSandboxSafeRoles()
	}
	return s.SandboxSafeRoles
}

// ValidateSandboxSafeRole checks one sandbox_safe_roles entry: a registered
// role of the path category. Config validation uses it so that gateway.yaml
// errors name the field.
func ValidateSandboxSafeRole(r Role) error {
	d := roleDef(r)
	if d == nil {
		return fmt.Errorf("unknown role %q", r)
	}
	if d.Category != CategoryPath {
		return fmt.Errorf("role %q (category %s) is not a path role; only path roles (%s) can be sandbox-safe", r, d.Category, joinRoles(RolesByCategory(CategoryPath)))
	}
	return nil
}

// validateSandboxSafeRoles checks the whole list: every entry valid, none
// repeated. The error names the index (sandbox_safe_roles[i]).
func validateSandboxSafeRoles(rs []Role) (roleSet, error) {
	var set roleSet
	for i, r := range rs {
		field := fmt.Sprintf("sandbox_safe_roles[%d]", i)
		if err := ValidateSandboxSafeRole(r); err != nil {
			return 0, settingsErr(field, err)
		}
		if set.has(r) {
			return 0, settingsErr(field, fmt.Errorf("duplicate role %q", r))
		}
		set.add(r)
	}
	return set, nil
}

func joinRoles(rs []Role) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(r))
	}
	return b.String()
}

func (s Settings) home() string {
	if s.Home != "" {
		return s.Home
	}
	return os.Getenv("HOME")
}

// ValidateDomainPattern checks one allowlist entry ("host", "*.suffix",
// "*", an IP literal or "host/owner/repo"). Config validation uses it so
// that gateway.yaml errors name the field.
func ValidateDomainPattern(p string) error {
	if _, err := parseDomainPattern(p); err != nil {
		return fmt.Errorf("%q: %w", p, unwrapParse(err))
	}
	return nil
}

// ValidateProtectedBranch checks one protected branch name or pattern.
func ValidateProtectedBranch(b string) error {
	_, err := parseProtectedBranch(b)
	return err
}
