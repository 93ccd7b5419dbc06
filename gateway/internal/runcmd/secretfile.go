package runcmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SecretFile returns a getenv that falls back, for the variable name only,
// to the one-line content of path (the stack's compose/secrets/ file, which
// `make up` writes) when getenv does not set it. A missing file is no error;
// an unreadable one is. The content is never part of an error.
func SecretFile(name, path string, getenv func(string) string) (func(string) string, error) {
	if getenv(name) != "" {
		return getenv, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return getenv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	v := strings.TrimSpace(string(b))
	return func(k string) string {
		if k == name {
			return v
		}
		return getenv(k)
	}, nil
}

// ExistingDir returns a getenv that falls back, for the variable name only,
// to the absolute form of dir when getenv does not set it and dir is an
// existing directory (the stack's compose/workspaces/, which `make up`
// creates); otherwise getenv unchanged.
func ExistingDir(name, dir string, getenv func(string) string) func(string) string {
	if getenv(name) != "" {
		return getenv
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return getenv
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return getenv
	}
	return func(k string) string {
		if k == name {
			return abs
		}
		return getenv(k)
	}
}

// tokenDirPrefix starts the name of a run's token directory.
const tokenDirPrefix = "ironcurtain-run-"

// tokenFileName is the token file in its directory.
const tokenFileName = "agent-token"

// writeTokenFile writes token into a new directory below tmp (mode 0700:
// no other user of the host gets in) as a file of mode 0644 (the
// container's non-root user reads it through its bind mount). It returns
// the directory, also on an error after creating it, and the file.
func writeTokenFile(tmp, token string) (dir, file string, err error) {
	dir, err = os.MkdirTemp(tmp, tokenDirPrefix)
	if err != nil {
		return "", "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", "", err
	}
	file = filepath.Join(dir, tokenFileName)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return dir, "", err
	}
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(file, 0o644)
	}
	return dir, file, err
}

// removeTokenDir removes a directory writeTokenFile made (dir as a
// container label names it: only a directory of that form, and only the
// token file in it).
func removeTokenDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(filepath.Base(dir), tokenDirPrefix) {
		return fmt.Errorf("%q is not a token directory of a run", dir)
	}
	if err := os.Remove(filepath.Join(dir, tokenFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
