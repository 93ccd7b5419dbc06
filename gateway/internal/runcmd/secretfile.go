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
