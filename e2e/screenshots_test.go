package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScreenshotsStayOutOfTheTree: a test run writes its screenshots to a
// temporary directory; only an explicit IC_E2E_SCREENSHOTS (what `make
// screenshots` sets) writes elsewhere, so running the suite never leaves
// the tracked docs/console/ images changed.
func TestScreenshotsStayOutOfTheTree(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     string
		set     bool
		inTree  bool
		wantDir string
	}{
		{name: "unset: a temporary directory", inTree: false},
		{name: "empty: a temporary directory", set: true, inTree: false},
		{name: "explicit: that directory", set: true, env: filepath.Join(root, "docs", "console"), inTree: true, wantDir: filepath.Join(root, "docs", "console")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envScreenshots, tc.env)
			if !tc.set {
				if err := os.Unsetenv(envScreenshots); err != nil {
					t.Fatal(err)
				}
			}
			dir := screenshotDir(t)
			rel, err := filepath.Rel(root, dir)
			inTree := err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
			if inTree != tc.inTree {
				t.Fatalf("screenshotDir() = %s: in the repository %v, want %v", dir, inTree, tc.inTree)
			}
			if tc.wantDir != "" && dir != tc.wantDir {
				t.Fatalf("screenshotDir() = %s, want %s", dir, tc.wantDir)
			}
		})
	}
}
