package config

import (
	"testing"
	"time"
)

func TestLoopBreakerSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string
		want    LoopBreakerConfig
	}{
		{name: "absent: zero (the guard's defaults)", yaml: "mcp: {}\n"},
		{name: "set", yaml: "loop_breaker:\n  calls_per_minute: 300\n  identical_calls: 10\n  identical_window: 2m\n  consecutive_denials: 20\n  cooldown: 30m\n  max_sessions: 500\n",
			want: LoopBreakerConfig{CallsPerMinute: 300, IdenticalCalls: 10, IdenticalWindow: 2 * time.Minute, ConsecutiveDenials: 20, Cooldown: 30 * time.Minute, MaxSessions: 500}},
		{name: "negative and out of range", yaml: "loop_breaker:\n  calls_per_minute: -1\n  identical_calls: 1\n  identical_window: 10ms\n  consecutive_denials: -5\n  cooldown: 1000h\n  max_sessions: -1\n",
			wantErr: []string{"loop_breaker.calls_per_minute", "loop_breaker.identical_calls", "loop_breaker.identical_window",
				"loop_breaker.consecutive_denials", "loop_breaker.cooldown", "loop_breaker.max_sessions"}},
		{name: "unknown key", yaml: "loop_breaker:\n  enabled: false\n", wantErr: []string{"enabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "/cfg/gateway.yaml", withFetch(tt.yaml), tt.wantErr)
			if c == nil {
				return
			}
			if c.LoopBreaker != tt.want {
				t.Fatalf("loop_breaker = %+v, want %+v", c.LoopBreaker, tt.want)
			}
		})
	}
}
