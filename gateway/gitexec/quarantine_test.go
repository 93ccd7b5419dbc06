package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/testenv"
)

// TestQuarantine: a quarantine must sit directly inside the repository's
// objects directory; objects written under it land there only, and the
// repository's objects are read through it; Env cannot set the variables.
func TestQuarantine(t *testing.T) {
	testenv.Require(t, "git")
	dir := t.TempDir()
	repo := filepath.Join(dir, "r.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	ctx := context.Background()
	base := Options{GitDir: repo}
	o := base
	o.Stdin = strings.NewReader("in the repository\n")
	res, err := Run(ctx, o, "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	inRepo := strings.TrimSpace(string(res.Stdout))

	q := filepath.Join(repo, "objects", "incoming-1")
	if err := os.Mkdir(q, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, quarantine, env string
	}{
		{name: "outside objects", quarantine: filepath.Join(dir, "elsewhere")},
		{name: "nested deeper", quarantine: filepath.Join(repo, "objects", "a", "b")},
		{name: "objects itself", quarantine: filepath.Join(repo, "objects")},
		{name: "dot-dot", quarantine: filepath.Join(repo, "objects") + "/../x"},
		{name: "env object directory", env: "GIT_OBJECT_DIRECTORY=" + q},
		{name: "env quarantine path", env: "GIT_QUARANTINE_PATH=" + q},
		{name: "env alternates", env: "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + q},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			o.Quarantine = tc.quarantine
			if tc.env != "" {
				o.Env = []string{tc.env}
			}
			if _, err := Run(ctx, o, "rev-parse", "--git-dir"); !errors.Is(err, ErrBadOption) {
				t.Fatalf("err %v, want ErrBadOption", err)
			}
		})
	}

	o = base
	o.Quarantine = q
	o.Stdin = strings.NewReader("quarantined\n")
	res, err = Run(ctx, o, "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(res.Stdout))
	if _, err := os.Stat(filepath.Join(q, id[:2], id[2:])); err != nil {
		t.Fatalf("the object is not in the quarantine: %v", err)
	}
	if _, err := Run(ctx, base, "cat-file", "-e", id); err == nil {
		t.Fatal("the repository sees the quarantined object")
	}
	o.Stdin = nil
	if _, err := Run(ctx, o, "cat-file", "-e", inRepo); err != nil {
		t.Fatalf("the quarantine does not read the repository's objects: %v", err)
	}
	if _, err := Run(ctx, o, "update-ref", "refs/heads/x", inRepo); err == nil {
		t.Fatal("a ref was updated in quarantine")
	}
}
