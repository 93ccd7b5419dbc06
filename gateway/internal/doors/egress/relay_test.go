package egress

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// The generic user-space relay (used when a side is not a TCP socket,
// here over net.Pipe) moves and counts bytes both ways and closes idle
// tunnels.
func TestRelayUserSpace(t *testing.T) {
	tests := []struct {
		name     string
		traffic  time.Duration // how long the client keeps talking
		wantIdle bool
	}{
		{name: "active then closed", traffic: 800 * time.Millisecond},
		{name: "idle", wantIdle: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Proxy{cfg: ProxyConfig{IdleTimeout: 500 * time.Millisecond}}
			clientSide, proxyClient := net.Pipe()
			proxyTarget, targetSide := net.Pipe()
			go func() { // the target echoes
				_, _ = io.Copy(targetSide, targetSide)
				targetSide.Close()
			}()
			st := newState("connect", "CONNECT")
			done := make(chan error, 1)
			go func() { done <- p.relay(st, proxyClient, proxyTarget) }()
			start := time.Now()
			buf := make([]byte, 4)
			for time.Since(start) < tt.traffic {
				if _, err := clientSide.Write([]byte("ping")); err != nil {
					t.Fatalf("write: %v", err)
				}
				if _, err := io.ReadFull(clientSide, buf); err != nil {
					t.Fatalf("read: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !tt.wantIdle {
				clientSide.Close()
			}
			select {
			case err := <-done:
				if tt.wantIdle != errors.Is(err, errIdle) {
					t.Fatalf("relay = %v; want idle %v", err, tt.wantIdle)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("relay did not end")
			}
			if !tt.wantIdle && (st.up.Load() == 0 || st.up.Load() != st.down.Load()) {
				t.Fatalf("up %d, down %d", st.up.Load(), st.down.Load())
			}
			clientSide.Close()
		})
	}
}
