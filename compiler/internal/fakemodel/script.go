package fakemodel

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Script is a set of recorded exchanges. Each Entry matches requests by
// substrings of the system prompt and of the last message and answers them
// with its Answers in order, so a malformed reply followed by a corrected
// one replays exactly. The first matching entry wins, which keeps the
// replay deterministic however concurrently the requests arrive.
type Script struct {
	Entries []Entry `json:"entries"`

	mu   sync.Mutex
	used map[int]int
}

// Entry is one recorded exchange.
type Entry struct {
	// Name identifies the entry in error messages.
	Name string `json:"name"`
	// System lists substrings the system prompt must all contain.
	System []string `json:"system,omitempty"`
	// Last lists substrings the last message must all contain.
	Last []string `json:"last,omitempty"`
	// Answers are served in order; the last one repeats when Repeat is set.
	Answers []Answer `json:"answers"`
	Repeat  bool     `json:"repeat,omitempty"`
}

// LoadScript reads a Script from a JSON file.
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading script: %w", err)
	}
	var s Script
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding script %s: %w", path, err)
	}
	return &s, nil
}

// Respond answers r from the first matching entry. A request no entry
// matches, or an entry whose answers ran out, gets HTTP 599 and a
// description in Unmatched.
func (s *Script) Respond(r Request) Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == nil {
		s.used = map[int]int{}
	}
	for i, e := range s.Entries {
		if !containsAll(r.System, e.System) || !containsAll(r.Last(), e.Last) {
			continue
		}
		n := s.used[i]
		if n >= len(e.Answers) {
			if e.Repeat && len(e.Answers) > 0 {
				return e.Answers[len(e.Answers)-1]
			}
			return Answer{Status: 599}
		}
		s.used[i] = n + 1
		return e.Answers[n]
	}
	return Answer{Status: 599}
}

// Unused lists entries with answers never served, for tests that want every
// recorded reply consumed.
func (s *Script) Unused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, e := range s.Entries {
		if s.used[i] < len(e.Answers) {
			out = append(out, fmt.Sprintf("%s (%d of %d answers served)", e.Name, s.used[i], len(e.Answers)))
		}
	}
	return out
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
