package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Transcript is a scripted conversation for the Replay model (YAML or
// JSON). Step i answers the model's i-th turn: either code to run with
// execute_code (optionally with some text), or a final answer. A step may
// carry expectations on the result of the previous step's code; a failed
// expectation fails the run.
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

// Step is one scripted model turn.
type Step struct {
	Say    string  `yaml:"say,omitempty" json:"say,omitempty"`     // text shown with the code
	Code   string  `yaml:"code,omitempty" json:"code,omitempty"`   // TypeScript for execute_code
	Final  string  `yaml:"final,omitempty" json:"final,omitempty"` // the final answer
	Expect *Expect `yaml:"expect,omitempty" json:"expect,omitempty"`
	Usage  *struct {
		Input  int64 `yaml:"input" json:"input"`
		Output int64 `yaml:"output" json:"output"`
	} `yaml:"usage,omitempty" json:"usage,omitempty"` // tokens to report, for budget tests
}

// Expect checks the result of the previous step's code.
type Expect struct {
	Status      string   `yaml:"status,omitempty" json:"status,omitempty"` // "ok" or "error"
	Contains    []string `yaml:"contains,omitempty" json:"contains,omitempty"`
	NotContains []string `yaml:"not_contains,omitempty" json:"not_contains,omitempty"`
}

// ErrExpectation is returned when a transcript's expectation fails.
var ErrExpectation = errors.New("replay expectation failed")

// Replay is a Model that plays a Transcript. Which step to play is derived
// from the conversation (the number of assistant turns so far), so a
// Replay holds no state and can serve any number of sessions.
type Replay struct {
	path string
	t    Transcript
}

// LoadReplay reads a transcript file (YAML, of which JSON is a subset).
func LoadReplay(path string) (*Replay, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading replay transcript: %w", err)
	}
	r, err := ParseTranscript(raw)
	if err != nil {
		return nil, fmt.Errorf("loading replay transcript %s: %w", path, err)
	}
	r.path = path
	return r, nil
}

// ParseTranscript decodes and validates a transcript. Unknown fields are
// errors, so a misspelt key does not silently change a test.
func ParseTranscript(raw []byte) (*Replay, error) {
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
				return nil, fmt.Errorf("decoding transcript: steps[0].expect: the first step has no previous result")
			}
			if s.Expect.Status != "" && s.Expect.Status != "ok" && s.Expect.Status != "error" {
				return nil, fmt.Errorf("decoding transcript: steps[%d].expect.status: %q is not ok or error", i, s.Expect.Status)
			}
		}
	}
	return &Replay{t: t}, nil
}

// Transcript returns the transcript being played.
func (r *Replay) Transcript() Transcript { return r.t }

// Name implements Model.
func (r *Replay) Name() string {
	if r.path != "" {
		return "replay:" + r.path
	}
	return "replay:" + r.t.Name
}

// Complete implements Model: it plays the step for this turn.
func (r *Replay) Complete(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	turn := 0
	for _, m := range req.Messages {
		if m.Role == Assistant {
			turn++
		}
	}
	if turn >= len(r.t.Steps) {
		return Response{}, fmt.Errorf("replay %s: the transcript has %d steps and the conversation asks for step %d", r.Name(), len(r.t.Steps), turn+1)
	}
	step := r.t.Steps[turn]
	if step.Expect != nil {
		if err := checkExpect(turn, step.Expect, req.Messages); err != nil {
			return Response{}, err
		}
	}
	var out Response
	if step.Usage != nil {
		out.Usage = Usage{InputTokens: step.Usage.Input, OutputTokens: step.Usage.Output}
	}
	if step.Final != "" {
		out.Text = step.Final
		out.StopReason = "end_turn"
		return out, nil
	}
	out.Text = step.Say
	out.Calls = []ToolCall{{ID: fmt.Sprintf("replay-%d", turn+1), Code: step.Code}}
	out.StopReason = "tool_use"
	return out, nil
}

func checkExpect(turn int, e *Expect, msgs []Message) error {
	if len(msgs) == 0 || len(msgs[len(msgs)-1].Results) == 0 {
		return fmt.Errorf("%w: step %d: there is no previous tool result", ErrExpectation, turn+1)
	}
	res := msgs[len(msgs)-1].Results[0]
	if e.Status == "ok" && res.IsError {
		return fmt.Errorf("%w: step %d: the previous run failed, want ok:\n%s", ErrExpectation, turn+1, res.Content)
	}
	if e.Status == "error" && !res.IsError {
		return fmt.Errorf("%w: step %d: the previous run succeeded, want an error:\n%s", ErrExpectation, turn+1, res.Content)
	}
	for _, s := range e.Contains {
		if !strings.Contains(res.Content, s) {
			return fmt.Errorf("%w: step %d: the previous result lacks %q:\n%s", ErrExpectation, turn+1, s, res.Content)
		}
	}
	for _, s := range e.NotContains {
		if strings.Contains(res.Content, s) {
			return fmt.Errorf("%w: step %d: the previous result contains %q:\n%s", ErrExpectation, turn+1, s, res.Content)
		}
	}
	return nil
}

// codeArguments encodes execute_code's input as a JSON string.
func codeArguments(code string) string {
	b, err := json.Marshal(map[string]string{"code": code})
	if err != nil {
		return `{"code":""}`
	}
	return string(b)
}
