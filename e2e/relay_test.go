package e2e_test

import (
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// TestRelayAndKeys: the agent talks to "Anthropic" (the internet
// container's fake, which checks the key) only through the gateway's
// relay, which injects the key; the agent container's environment and
// filesystem hold no key, and no record or log holds any secret.
func TestRelayAndKeys(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 6*time.Minute)
	const session = "relay"

	t.Run("a model session through the relay", func(t *testing.T) {
		r, err := s.ExecAgent(ctx, session, nil, "ironcurtain-agent", "run", "--model", "anthropic:claude-e2e", "-v", "What is in the sandbox?")
		if err != nil {
			t.Fatal(err)
		}
		if r.Code != 0 {
			t.Fatalf("agent run with the relayed model: %s", r)
		}
		answer := strings.TrimSpace(r.Stdout)
		t.Logf("answer: %s", answer)
		// The fake model quotes the tool result: the round trip went
		// model → agent → gateway tool → agent → model.
		for _, want := range []string{"relay final:", "relay-probe", "/workspace"} {
			if !strings.Contains(answer, want) {
				t.Errorf("answer %q lacks %q", answer, want)
			}
		}
	})

	t.Run("the provider saw the injected key and no agent credential", func(t *testing.T) {
		reqs, err := s.InternetRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, q := range reqs {
			if q.Host != stack.HostModel {
				continue
			}
			t.Logf("model request: %+v", q)
			if q.Note == "key ok" && q.Status == 200 {
				ok++
			} else {
				t.Errorf("model request not accepted: %+v", q)
			}
		}
		if ok != 2 {
			t.Errorf("%d accepted model requests, want 2 (code step, final answer)", ok)
		}
	})

	t.Run("llm_calls", func(t *testing.T) {
		var calls []struct {
			Provider     string `json:"provider"`
			Model        string `json:"model"`
			Path         string `json:"path"`
			StatusCode   int    `json:"status_code"`
			InputTokens  int64  `json:"input_tokens"`
			OutputTokens int64  `json:"output_tokens"`
			Error        string `json:"error"`
		}
		if err := s.QueryJSON(ctx, `SELECT provider, model, path, status_code, input_tokens, output_tokens, error
			FROM llm_calls WHERE session_id = 'relay' ORDER BY seq`, &calls); err != nil {
			t.Fatal(err)
		}
		if len(calls) != 2 {
			t.Fatalf("llm_calls rows: %+v, want 2", calls)
		}
		for _, c := range calls {
			if c.Provider != "anthropic" || c.Model != "claude-e2e" || c.Path != "/v1/messages" || c.StatusCode != 200 || c.InputTokens < 100 || c.OutputTokens != 20 {
				t.Errorf("llm_calls row %+v", c)
			}
		}
		calls2 := toolCalls(t, ctx, s, session)
		if len(calls2) != 1 || calls2[0].Tool != "list_allowed_directories" || calls2[0].Outcome != "ok" {
			t.Errorf("tool_calls of the relay session: %v", calls2)
		}
		verifyChain(t, ctx, s, session, 4)
	})

	t.Run("no key in the agent container's environment", func(t *testing.T) {
		cfg, err := s.AgentConfigEnv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Self []string `json:"self"`
			Init []string `json:"init"`
		}
		if err := s.Probe(ctx, session, nil, &env, "env"); err != nil {
			t.Fatal(err)
		}
		for source, vars := range map[string][]string{"docker inspect": cfg, "exec environment": env.Self, "PID 1 environment": env.Init} {
			if len(vars) == 0 {
				t.Errorf("%s: empty (the check would prove nothing)", source)
			}
			for _, kv := range vars {
				name, value, _ := strings.Cut(kv, "=")
				for secret, v := range s.Secrets.Named() {
					if strings.Contains(value, v) {
						t.Errorf("%s: %s holds %s", source, name, secret)
					}
				}
				switch name {
				case "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "IRONCURTAIN_OPERATOR_TOKEN", "IRONCURTAIN_METRICS_TOKEN", "IRONCURTAIN_DATABASE_URL":
					t.Errorf("%s: %s is set in the agent container", source, name)
				}
			}
		}
	})

	t.Run("no key in the agent container's filesystem", func(t *testing.T) {
		// One pass over the export finds the secrets, and two controls
		// prove the scan sees what it should: a value from the image's
		// own layers (its passwd entry; the image is FROM scratch and
		// tiny) and a canary written in the container at run time.
		const imageControl, runtimeControl = "control: the image's passwd entry", "control: a canary written at run time"
		canary := "ic-e2e-canary-" + s.RunID + "-" + session
		if err := s.Probe(ctx, session, []byte(canary+"\n"), nil, "plant", "/tmp/ic-e2e-canary"); err != nil {
			t.Fatal(err)
		}
		scan := s.Secrets.Named()
		scan[imageControl] = "ironcurtain:x:10001:"
		scan[runtimeControl] = canary
		files, found, err := s.ScanFilesystem(ctx, s.Agent, scan)
		if err != nil {
			t.Fatal(err)
		}
		saw := map[string]bool{}
		for _, f := range found {
			if f.Secret == imageControl || f.Secret == runtimeControl {
				saw[f.Secret] = true
				continue
			}
			t.Errorf("the agent container's %s holds %s", f.Path, f.Secret)
		}
		t.Logf("scanned %d files of the agent container", files)
		if files < 5 || !saw[imageControl] || !saw[runtimeControl] {
			t.Errorf("%d files scanned, controls found %v: the export was not read through", files, saw)
		}
	})

	t.Run("doctor", func(t *testing.T) {
		r, err := s.ExecAgent(ctx, session, nil, "ironcurtain-agent", "doctor",
			"--direct", "1.1.1.1:443", "--unlisted-host", stack.HostBlocked+":443")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ironcurtain-agent doctor:\n%s%s", r.Stdout, r.Stderr)
		if r.Code != 0 {
			t.Fatalf("doctor: %s", r)
		}
		for _, line := range []string{"ok   credential env vars", "ok   credential files"} {
			if !strings.Contains(r.Stdout, line) {
				t.Errorf("doctor output lacks %q", line)
			}
		}
	})

	t.Run("no secret in records or logs", func(t *testing.T) {
		secrets := s.Secrets.Named()
		for name, tok := range s.AgentTokens {
			secrets["agent token "+name] = tok
		}
		// One query: every (table, secret) pair where a row's text holds
		// the secret.
		var values, checks []string
		for name, v := range secrets {
			values = append(values, "("+stack.Quote(name)+", "+stack.Quote(v)+")")
		}
		for _, table := range []string{"sessions", "tool_calls", "tool_call_outcomes", "egress_events", "llm_calls", "escalations", "session_approvals"} {
			checks = append(checks, "SELECT "+stack.Quote(table)+" AS tbl, s.name FROM secrets s WHERE EXISTS (SELECT 1 FROM "+table+" t WHERE strpos(t::text, s.v) > 0)")
		}
		var leaks []struct {
			Table string `json:"tbl"`
			Name  string `json:"name"`
		}
		q := "WITH secrets(name, v) AS (VALUES " + strings.Join(values, ", ") + ") " + strings.Join(checks, " UNION ALL ")
		if err := s.QueryJSON(ctx, q, &leaks); err != nil {
			t.Fatal(err)
		}
		for _, l := range leaks {
			t.Errorf("rows of %s hold %s", l.Table, l.Name)
		}
		logs := map[string]string{"gateway": s.GatewayLogs(ctx), "internet": s.InternetLogs(ctx)}
		for src, text := range logs {
			for name, v := range secrets {
				if strings.Contains(text, v) {
					t.Errorf("the %s logs hold %s", src, name)
				}
			}
		}
	})
}
