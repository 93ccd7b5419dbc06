package runcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "operator-token")
	if err := os.WriteFile(file, []byte("ic-operator-x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OTHER": "o"}
	getenv := func(k string) string { return env[k] }

	g, err := SecretFile(EnvOperatorToken, file, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got := g(EnvOperatorToken); got != "ic-operator-x" {
		t.Errorf("from the file: %q", got)
	}
	if got := g("OTHER"); got != "o" {
		t.Errorf("other variables: %q", got)
	}

	env[EnvOperatorToken] = "from-env"
	if g, err = SecretFile(EnvOperatorToken, file, getenv); err != nil || g(EnvOperatorToken) != "from-env" {
		t.Errorf("the environment wins: %q, %v", g(EnvOperatorToken), err)
	}

	delete(env, EnvOperatorToken)
	if g, err = SecretFile(EnvOperatorToken, filepath.Join(dir, "missing"), getenv); err != nil || g(EnvOperatorToken) != "" {
		t.Errorf("a missing file: %q, %v", g(EnvOperatorToken), err)
	}
	if _, err = SecretFile(EnvOperatorToken, dir, getenv); err == nil {
		t.Error("an unreadable file (a directory) is no error")
	}
}

func TestExistingDir(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := ExistingDir(EnvWorkspacesDir, dir, getenv)(EnvWorkspacesDir); got != dir {
		t.Errorf("an existing directory: %q", got)
	}
	if got := ExistingDir(EnvWorkspacesDir, filepath.Join(dir, "missing"), getenv)(EnvWorkspacesDir); got != "" {
		t.Errorf("a missing directory: %q", got)
	}
	env[EnvWorkspacesDir] = "/from/env"
	if got := ExistingDir(EnvWorkspacesDir, dir, getenv)(EnvWorkspacesDir); got != "/from/env" {
		t.Errorf("the environment wins: %q", got)
	}
}

// TestTokenFile: the token is written into a 0700 directory as a 0644 file
// and removed with it; removeTokenDir touches nothing but such a directory.
func TestTokenFile(t *testing.T) {
	tmp := t.TempDir()
	dir, file, err := writeTokenFile(tmp, "icsess_x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil || string(b) != "icsess_x\n" {
		t.Fatalf("token file: %q %v", b, err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {file, 0o644}} {
		if fi, err := os.Stat(c.path); err != nil || fi.Mode().Perm() != c.mode {
			t.Errorf("%s: mode %v %v, want %v", c.path, fi.Mode().Perm(), err, c.mode)
		}
	}
	other := filepath.Join(tmp, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{other, "relative/ironcurtain-run-1", dir + "/../other"} {
		if err := removeTokenDir(bad); err == nil {
			t.Errorf("removeTokenDir(%q) accepted", bad)
		}
	}
	if err := removeTokenDir(dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 1 || left[0].Name() != "other" {
		t.Errorf("left in the temporary directory: %v", left)
	}
	if err := removeTokenDir(dir); err != nil {
		t.Errorf("removing again: %v", err)
	}
}

// TestVerifyCmd: the session is an argument of its own, never part of the
// script, and the database URL is read from the secret file in the
// container (no URL on the command line).
func TestVerifyCmd(t *testing.T) {
	c := verifyCmd("sess_abc")
	if len(c) != 5 || c[0] != "/bin/sh" || c[4] != "sess_abc" || strings.Contains(c[2], "sess_abc") ||
		!strings.Contains(c[2], "$(cat "+DatabaseURLFile+")") || !strings.Contains(c[2], `exec ironcurtain audit verify --session "$1"`) {
		t.Errorf("verifyCmd = %q", c)
	}
}
