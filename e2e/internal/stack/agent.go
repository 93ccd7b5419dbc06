package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
)

// ExecAgent runs a command in the agent container with the environment of
// session (see AgentEnv), as the image's user.
func (s *Stack) ExecAgent(ctx context.Context, session string, stdin []byte, cmd ...string) (ExecResult, error) {
	env := s.AgentEnv(session)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, 0, len(keys))
	for _, k := range keys {
		kv = append(kv, k+"="+env[k])
	}
	return execIn(ctx, s.cli, s.Agent.ID, cmd, kv, stdin)
}

// RunTranscript copies a replay transcript into the agent container and
// runs `ironcurtain-agent run --model replay:<it> task` for session.
func (s *Stack) RunTranscript(ctx context.Context, session, name string, transcript []byte, task string, extra ...string) (ExecResult, error) {
	p := path.Join(TranscriptDir, name+".yaml")
	if err := s.Agent.CopyToContainer(ctx, transcript, p, 0o644); err != nil {
		return ExecResult{}, fmt.Errorf("copying transcript %s: %w", name, err)
	}
	args := append([]string{"ironcurtain-agent", "run", "--model", "replay:" + p}, extra...)
	return s.ExecAgent(ctx, session, nil, append(args, task)...)
}

// Probe runs the probe in the agent container and decodes its JSON output
// into out.
func (s *Stack) Probe(ctx context.Context, session string, stdin []byte, out any, args ...string) error {
	r, err := s.ExecAgent(ctx, session, stdin, append([]string{ProbePath}, args...)...)
	if err != nil {
		return err
	}
	if r.Code != 0 {
		return fmt.Errorf("probe %v: %s", args, r)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal([]byte(r.Stdout), out); err != nil {
		return fmt.Errorf("probe %v: decoding %q: %w", args, r.Stdout, err)
	}
	return nil
}
