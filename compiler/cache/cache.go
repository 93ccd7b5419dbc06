// Package cache stores validated model replies under a content hash of
// everything that produced them (model name, system prompt, conversation,
// schema), so rerunning the compiler on unchanged input makes no model call.
package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Version is mixed into every key; bump it when the meaning of a cached
// reply changes.
const Version = "ironcurtain-compile/cache/v1"

// Key hashes parts with length framing, so ("ab","c") and ("a","bc") differ.
func Key(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Store is a directory of cached replies, one file per key. It is safe for
// concurrent use by goroutines and processes: writes are atomic renames.
type Store struct {
	dir string
}

// Open returns a Store in dir, creating it if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating cache directory: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(key string) (string, error) {
	if len(key) != sha256.Size*2 {
		return "", fmt.Errorf("cache key %q is not a sha256 hex digest", key)
	}
	if _, err := hex.DecodeString(key); err != nil {
		return "", fmt.Errorf("cache key %q is not a sha256 hex digest", key)
	}
	return filepath.Join(s.dir, key[:2], key+".json"), nil
}

// Get returns the value stored under key; ok is false on a miss.
func (s *Store) Get(key string) (value []byte, ok bool, err error) {
	if s == nil {
		return nil, false, nil
	}
	p, err := s.path(key)
	if err != nil {
		return nil, false, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading cache entry: %w", err)
	}
	return b, true, nil
}

// Put stores value under key.
func (s *Store) Put(key string, value []byte) error {
	if s == nil {
		return nil
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("creating cache directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("writing cache entry: %w", err)
	}
	if _, err := tmp.Write(value); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("writing cache entry: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing cache entry: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing cache entry: %w", err)
	}
	return nil
}
