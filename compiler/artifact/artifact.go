// Package artifact reads and writes the compiler's JSON artifacts in the
// original IronCurtain formats: two-space indented, a trailing newline, map
// keys sorted, written atomically (temporary file and rename) so the gateway
// never reads half a file. Output is byte-for-byte reproducible: timestamps
// come from an injected clock and every list is in a defined order.
package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"ironcurtain.dev/compiler/cache"
)

// File names inside a policy directory.
const (
	CompiledPolicyFile = "compiled-policy.json"
	DynamicListsFile   = "dynamic-lists.json"
	AnnotationsFile    = "tool-annotations.json"
	ScenariosFile      = "test-scenarios.json"
)

// Encode returns v as the artifacts are written: indented JSON without HTML
// escaping, ending in a newline.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write encodes v into dir/name atomically, creating dir if needed.
func Write(dir, name string, v any) error {
	b, err := Encode(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return WriteBytes(filepath.Join(dir, name), b)
}

// WriteBytes writes b to path atomically.
func WriteBytes(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Remove deletes dir/name if it exists.
func Remove(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale %s: %w", name, err)
	}
	return nil
}

// ReadOptional returns the bytes of path, or nil when it does not exist.
func ReadOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// TextHash is the sha256 hex digest of s (the original's constitutionHash).
func TextHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// InputHash hashes the inputs of a step with length framing.
func InputHash(parts ...string) string { return cache.Key(parts...) }

// Timestamp formats t like the original's generatedAt (UTC, milliseconds).
func Timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// JSONString returns the compact JSON of v for hashing; it panics only on
// values that cannot be marshalled, which callers never pass.
func JSONString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("artifact: marshalling %T: %v", v, err))
	}
	return string(b)
}
