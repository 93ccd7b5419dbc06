package model

import (
	"context"
	"encoding/json"
	"fmt"

	"ironcurtain.dev/agent/transcript"
)

// ErrExpectation is returned when a transcript's expectation fails.
var ErrExpectation = transcript.ErrExpectation

// Replay is a Model that plays a Transcript. Which step to play is derived
// from the conversation (the number of assistant turns so far), so a
// Replay holds no state and can serve any number of sessions.
type Replay struct {
	path string
	t    *transcript.Transcript
}

// LoadReplay reads a transcript file (see package transcript).
func LoadReplay(path string) (*Replay, error) {
	t, err := transcript.Load(path)
	if err != nil {
		return nil, err
	}
	return &Replay{path: path, t: t}, nil
}

// ParseTranscript decodes and validates a transcript (see package transcript).
func ParseTranscript(raw []byte) (*Replay, error) {
	t, err := transcript.Parse(raw)
	if err != nil {
		return nil, err
	}
	return &Replay{t: t}, nil
}

// Transcript returns the transcript being played.
func (r *Replay) Transcript() transcript.Transcript { return *r.t }

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

func checkExpect(turn int, e *transcript.Expect, msgs []Message) error {
	if len(msgs) == 0 || len(msgs[len(msgs)-1].Results) == 0 {
		return fmt.Errorf("%w: step %d: there is no previous tool result", ErrExpectation, turn+1)
	}
	res := msgs[len(msgs)-1].Results[0]
	return e.Check(turn+1, res.Content, res.IsError)
}

// codeArguments encodes execute_code's input as a JSON string.
func codeArguments(code string) string {
	b, err := json.Marshal(map[string]string{"code": code})
	if err != nil {
		return `{"code":""}`
	}
	return string(b)
}
