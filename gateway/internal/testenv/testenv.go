// Package testenv holds the one rule for tests that need something outside
// Go (git, gh, promtool, Docker, an image, a privilege): on a developer
// machine a missing prerequisite skips the test; in CI (CI=true) it fails
// it, never skips (DESIGN §13), so a CI runner without the tool cannot pass
// by skipping. Only tests import it.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// EnvCI names the variable that marks a CI run ("true").
const EnvCI = "CI"

// InCI reports whether the tests run in CI (CI=true).
func InCI() bool { return os.Getenv(EnvCI) == "true" }

// Missing ends the test for a missing prerequisite: Fatalf in CI, Skipf
// elsewhere. The message says which.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI=true: a missing prerequisite is a failure, never a skip)", msg)
		return
	}
	t.Skipf("%s (in CI, CI=true, this fails)", msg)
}

// hints say how to install a tool.
var hints = map[string]string{
	"gh":               "scripts/prereqs.sh installs it",
	"promtool":         "apt-get install prometheus; scripts/prereqs.sh",
	"git":              "scripts/prereqs.sh installs it",
	"git-http-backend": "it comes with git; scripts/prereqs.sh installs it",
}

// Require returns the path of tool, or ends the test (Missing) when it is
// not installed. tool is an executable looked up in PATH (the first of
// tool and alternatives found), or "git-http-backend", found in git's
// exec path.
func Require(t testing.TB, tool string, alternatives ...string) string {
	t.Helper()
	p, err := find(tool, alternatives)
	if err != nil {
		msg := tool + " is not installed"
		if h := hints[tool]; h != "" {
			msg += " (" + h + ")"
		}
		Missing(t, "%s: %v", msg, err)
	}
	return p
}

func find(tool string, alternatives []string) (string, error) {
	if tool == "git-http-backend" {
		out, err := exec.Command("git", "--exec-path").Output()
		if err != nil {
			return "", fmt.Errorf("git --exec-path: %w", err)
		}
		p := filepath.Join(strings.TrimSpace(string(out)), tool)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	var first error
	for _, name := range append([]string{tool}, alternatives...) {
		p, err := exec.LookPath(name)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", first
}
