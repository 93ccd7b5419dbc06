package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/compiler"
	"ironcurtain.dev/compiler/internal/fakemodel"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    Spec
		wantErr string
	}{
		{in: "anthropic:claude-sonnet-4-6", want: Spec{Provider: Anthropic, Name: "claude-sonnet-4-6"}},
		{in: "openai:gpt-4.1", want: Spec{Provider: OpenAI, Name: "gpt-4.1"}},
		{in: "OpenAI:llama3:8b", want: Spec{Provider: OpenAI, Name: "llama3:8b"}},
		{in: "claude-haiku-4-5", want: Spec{Provider: Anthropic, Name: "claude-haiku-4-5"}},
		{in: "  ", wantErr: "empty"},
		{in: "openai:", wantErr: "no model name"},
		{in: "google:gemini", wantErr: "unknown provider"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSpec(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSpec = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		name        string
		spec        Spec
		flagURL     string
		env         map[string]string
		wantURL     string
		wantErr     error
		wantMessage string
	}{
		{name: "anthropic key", spec: Spec{Anthropic, "m"}, env: map[string]string{"ANTHROPIC_API_KEY": "k"}},
		{name: "missing anthropic key", spec: Spec{Anthropic, "m"}, env: map[string]string{"OPENAI_API_KEY": "k"}, wantErr: ErrMissingKey, wantMessage: "ANTHROPIC_API_KEY"},
		{name: "missing openai key", spec: Spec{OpenAI, "m"}, env: map[string]string{"ANTHROPIC_API_KEY": "k"}, wantErr: ErrMissingKey, wantMessage: "OPENAI_API_KEY"},
		{name: "base url from env", spec: Spec{OpenAI, "m"}, env: map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://ollama:11434/v1"}, wantURL: "http://ollama:11434/v1"},
		{name: "flag wins over env", spec: Spec{OpenAI, "m"}, flagURL: "https://vllm.internal/v1", env: map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://x"}, wantURL: "https://vllm.internal/v1"},
		{name: "relative base url", spec: Spec{Anthropic, "m"}, flagURL: "api.example.com", env: map[string]string{"ANTHROPIC_API_KEY": "k"}, wantMessage: "absolute http(s) URL"},
		{name: "file base url", spec: Spec{Anthropic, "m"}, flagURL: "file:///etc/passwd", env: map[string]string{"ANTHROPIC_API_KEY": "k"}, wantMessage: "absolute http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ConfigFromEnv(tt.spec, tt.flagURL, env(tt.env))
			if tt.wantMessage != "" || tt.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want %v", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantMessage) {
					t.Errorf("err %q does not name %q", err, tt.wantMessage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BaseURL != tt.wantURL || cfg.APIKey != "k" {
				t.Errorf("cfg = %+v", cfg)
			}
		})
	}
}

func TestProviderErrors(t *testing.T) {
	srv := fakemodel.New(func(fakemodel.Request) fakemodel.Answer { return fakemodel.Answer{Text: "ok"} })
	defer srv.Close()
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()

	tests := []struct {
		name    string
		cfg     Config
		wantErr error
		names   []string // substrings the message must contain
	}{
		{name: "anthropic ok", cfg: Config{Spec: Spec{Anthropic, "m"}, BaseURL: srv.AnthropicURL(), APIKey: "k"}},
		{name: "openai ok", cfg: Config{Spec: Spec{OpenAI, "m"}, BaseURL: srv.OpenAIURL(), APIKey: "k"}},
		{name: "anthropic rejected key", cfg: Config{Spec: Spec{Anthropic, "m"}, BaseURL: srv.AnthropicURL(), APIKey: fakemodel.RejectedKey}, wantErr: ErrRejectedKey, names: []string{"ANTHROPIC_API_KEY", "401"}},
		{name: "openai rejected key", cfg: Config{Spec: Spec{OpenAI, "m"}, BaseURL: srv.OpenAIURL(), APIKey: fakemodel.RejectedKey}, wantErr: ErrRejectedKey, names: []string{"OPENAI_API_KEY", "401"}},
		{name: "anthropic unreachable", cfg: Config{Spec: Spec{Anthropic, "m"}, BaseURL: dead, APIKey: "k"}, wantErr: ErrUnreachable, names: []string{dead, "ANTHROPIC_BASE_URL"}},
		{name: "openai unreachable", cfg: Config{Spec: Spec{OpenAI, "m"}, BaseURL: dead + "/v1", APIKey: "k"}, wantErr: ErrUnreachable, names: []string{dead, "OPENAI_BASE_URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.MaxRetries = 0
			m, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			reply, err := m.Complete(context.Background(), compiler.Prompt{System: "s", Messages: []compiler.Message{{Role: compiler.User, Content: "hi"}}})
			if tt.wantErr == nil {
				if err != nil || reply.Text != "ok" {
					t.Fatalf("reply %q, err %v", reply.Text, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			for _, n := range tt.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("err %q does not name %q", err, n)
				}
			}
			if strings.Contains(err.Error(), tt.cfg.APIKey) && tt.cfg.APIKey != "k" {
				t.Errorf("err %q leaks the key", err)
			}
		})
	}
}

func TestProvidersSendConversation(t *testing.T) {
	for _, p := range []Provider{Anthropic, OpenAI} {
		t.Run(string(p), func(t *testing.T) {
			var got fakemodel.Request
			srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer { got = r; return fakemodel.Answer{Text: "done"} })
			defer srv.Close()
			base := srv.AnthropicURL()
			if p == OpenAI {
				base = srv.OpenAIURL()
			}
			m, err := New(Config{Spec: Spec{p, "the-model"}, BaseURL: base, APIKey: "k", MaxRetries: 0})
			if err != nil {
				t.Fatal(err)
			}
			msgs := []compiler.Message{{Role: compiler.User, Content: "a"}, {Role: compiler.Assistant, Content: "b"}, {Role: compiler.User, Content: "c"}}
			if _, err := m.Complete(context.Background(), compiler.Prompt{System: "rules", Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			if got.Model != "the-model" || got.System != "rules" || len(got.Messages) != 3 {
				t.Fatalf("server saw %+v", got)
			}
			for i := range msgs {
				if got.Messages[i] != msgs[i] {
					t.Errorf("message %d = %+v, want %+v", i, got.Messages[i], msgs[i])
				}
			}
		})
	}
}

type slowModel struct {
	cur, peak atomic.Int64
}

func (s *slowModel) Complete(ctx context.Context, p compiler.Prompt) (compiler.Reply, error) {
	n := s.cur.Add(1)
	defer s.cur.Add(-1)
	for {
		old := s.peak.Load()
		if n <= old || s.peak.CompareAndSwap(old, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	return compiler.Reply{Text: "x"}, nil
}

func TestLimit(t *testing.T) {
	for _, n := range []int{1, 3} {
		sm := &slowModel{}
		m := Limit(sm, n)
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() { _, _ = m.Complete(context.Background(), compiler.Prompt{}) })
		}
		wg.Wait()
		if got := sm.peak.Load(); got != int64(n) {
			t.Errorf("Limit(%d): peak concurrency %d", n, got)
		}
	}
	// A waiting call gives up with its context.
	block := Limit(&blockingModel{}, 1)
	go func() { _, _ = block.Complete(context.Background(), compiler.Prompt{}) }()
	time.Sleep(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := block.Complete(ctx, compiler.Prompt{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting call err = %v", err)
	}
}

type blockingModel struct{}

func (blockingModel) Complete(ctx context.Context, _ compiler.Prompt) (compiler.Reply, error) {
	<-ctx.Done()
	return compiler.Reply{}, ctx.Err()
}

func TestLogged(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := NewLog(&buf, func() time.Time { return clock })
	m := Logged(&slowModel{}, log, "anthropic:x")
	if _, err := m.Complete(context.Background(), compiler.Prompt{Step: "compile/git", System: "s", Messages: []compiler.Message{{Role: compiler.User, Content: "u"}}}); err != nil {
		t.Fatal(err)
	}
	failing := Logged(blockingModel{}, log, "anthropic:x")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = failing.Complete(ctx, compiler.Prompt{Step: "judge/git"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log has %d lines:\n%s", len(lines), buf.String())
	}
	var e Entry
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Step != "compile/git" || e.Model != "anthropic:x" || e.Reply != "x" || e.System != "s" || !e.Time.Equal(clock) || e.Usage == nil {
		t.Errorf("entry = %+v", e)
	}
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil || !strings.Contains(e.Error, "canceled") {
		t.Errorf("error entry = %+v, %v", e, err)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

func TestLogKeepsFirstError(t *testing.T) {
	w := &failWriter{}
	log := NewLog(w, nil)
	log.Write(Entry{Step: "a"})
	log.Write(Entry{Step: "b"})
	if err := log.Err(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Err = %v", err)
	}
	if w.n != 1 {
		t.Errorf("writes after failure: %d", w.n)
	}
}
