// Package transcript reads the scripted conversations the replay model
// plays (YAML, of which JSON is a subset): ordered steps, each either the
// code the model "writes" for execute_code or its final answer, with
// optional expectations on the previous step's result. It is its own
// package so that it stays small: no SDK is linked to parse or fuzz it.
package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Transcript is a scripted conversation. Step i answers the model's i-th
// turn.
//
//	name: demo
//	steps:
//	  - say: Reading the README first.
//	    code: |
//	      return filesystem.read_text_file({path: "/workspace/README.md"});
//	  - expect: {status: ok, contains: ["IronCurtain"]}
//	    final: The README talks about IronCurtain.
type Transcript struct {
	Name  string `yaml:"name" json:"name"`
	Steps []Step `yaml:"steps" json:"steps"`
}

// Step is one scripted model turn: exactly one of Code and Final.
type Step struct {
	Say    string  `yaml:"say,omitempty" json:"say,omitempty"`     // text shown with the code
	Code   string  `yaml:"code,omitempty" json:"code,omitempty"`   // TypeScript for execute_code
	Final  string  `yaml:"final,omitempty" json:"final,omitempty"` // the final answer
	Expect *Expect `yaml:"expect,omitempty" json:"expect,omitempty"`
	Usage  *Usage  `yaml:"usage,omitempty" json:"usage,omitempty"`
}

// Usage is the token usage a step reports (for budget tests).
type Usage struct {
	Input  int64 `yaml:"input" json:"input"`
	Output int64 `yaml:"output" json:"output"`
}

// Expect checks the result of the previous step's code.
type Expect struct {
	Status      string   `yaml:"status,omitempty" json:"status,omitempty"` // "ok" or "error"
	Contains    []string `yaml:"contains,omitempty" json:"contains,omitempty"`
	NotContains []string `yaml:"not_contains,omitempty" json:"not_contains,omitempty"`
}

// ErrExpectation is returned when an expectation fails.
var ErrExpectation = errors.New("replay expectation failed")

// Load reads and validates a transcript file.
func Load(path string) (*Transcript, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading replay transcript: %w", err)
	}
	t, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("loading replay transcript %s: %w", path, err)
	}
	return t, nil
}

// Parse decodes and validates a transcript. Unknown fields are errors, so
// a misspelt key does not silently change a test.
func Parse(raw []byte) (*Transcript, error) {
	var t Transcript
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("decoding transcript: %w", err)
	}
	if len(t.Steps) == 0 {
		return nil, errors.New("decoding transcript: field steps: no steps")
	}
	for i, s := range t.Steps {
		hasCode, hasFinal := strings.TrimSpace(s.Code) != "", strings.TrimSpace(s.Final) != ""
		if hasCode == hasFinal {
			return nil, fmt.Errorf("decoding transcript: steps[%d]: exactly one of code or final is required", i)
		}
		if s.Expect != nil {
			if i == 0 {
				return nil, errors.New("decoding transcript: steps[0].expect: the first step has no previous result")
			}
			if s.Expect.Status != "" && s.Expect.Status != "ok" && s.Expect.Status != "error" {
				return nil, fmt.Errorf("decoding transcript: steps[%d].expect.status: %q is not ok or error", i, s.Expect.Status)
			}
		}
	}
	return &t, nil
}

// Check tests the previous step's result (its text and whether it was an
// error) for step number step (1-based, for messages).
func (e *Expect) Check(step int, content string, isError bool) error {
	if e.Status == "ok" && isError {
		return fmt.Errorf("%w: step %d: the previous run failed, want ok:\n%s", ErrExpectation, step, content)
	}
	if e.Status == "error" && !isError {
		return fmt.Errorf("%w: step %d: the previous run succeeded, want an error:\n%s", ErrExpectation, step, content)
	}
	for _, s := range e.Contains {
		if !strings.Contains(content, s) {
			return fmt.Errorf("%w: step %d: the previous result lacks %q:\n%s", ErrExpectation, step, s, content)
		}
	}
	for _, s := range e.NotContains {
		if strings.Contains(content, s) {
			return fmt.Errorf("%w: step %d: the previous result contains %q:\n%s", ErrExpectation, step, s, content)
		}
	}
	return nil
}
