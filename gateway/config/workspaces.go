package config

import (
	"errors"
	"path/filepath"
)

// SessionWorkspacesConfig is the session_workspaces section of
// gateway.yaml: a sandbox of its own for every minted session
// (docs/operations.md, "Sessions").
//
//	session_workspaces:
//	  root: /var/lib/ironcurtain/workspaces  # <root>/<session id>; "" (default): minted sessions share the sandbox
//	  keep: false                            # keep a session's directory after it is revoked or expires
//
// The root must be absolute and must not overlap the sandbox; the static
// agent tokens keep the sandbox.
type SessionWorkspacesConfig struct {
	Root string `yaml:"root"`
	Keep bool   `yaml:"keep"`
}

// Enabled reports whether minted sessions get their own workspaces.
func (w *SessionWorkspacesConfig) Enabled() bool { return w.Root != "" }

// Validate implements Validator.
func (w *SessionWorkspacesConfig) Validate() error {
	switch {
	case w.Root == "":
		if w.Keep {
			return Errorf("keep", "needs root")
		}
		return nil
	case !filepath.IsAbs(w.Root):
		return Errorf("root", "must be an absolute path, not %q", w.Root)
	case filepath.Clean(w.Root) == "/":
		return Errorf("root", "cannot be the root directory")
	}
	return nil
}

// workspaceOverlap reports a root that contains the sandbox or lies in it
// (sessions would see the static session's files, or it theirs).
func workspaceOverlap(root, sandbox string) error {
	if root == "" || sandbox == "" {
		return nil
	}
	r, s := filepath.Clean(root), filepath.Clean(sandbox)
	if r == s || withinDir(r, s) || withinDir(s, r) {
		return errors.New("must not overlap the sandbox " + s)
	}
	return nil
}

func withinDir(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}
