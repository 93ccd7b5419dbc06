package policy

import (
	"fmt"
	"os"
	"time"
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
	// case-insensitive). Empty: DefaultProtectedBranches.
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
	// AnnotationsFile is read by LoadDir when the policy directory has no
	// tool-annotations.json.
	AnnotationsFile string
	// ShadowPolicyDir, when set, is loaded by LoadDir as a report-only
	// second policy with the same settings.
	ShadowPolicyDir string
	// GitTimeout bounds each git run that resolves a remote
	// (DefaultGitTimeout when zero).
	GitTimeout time.Duration
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
