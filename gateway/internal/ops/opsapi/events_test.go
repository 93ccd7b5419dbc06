package opsapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeWatch hands out subscriptions and signals them all on change.
type fakeWatch struct {
	mu   sync.Mutex
	subs map[chan struct{}]bool
}

func (f *fakeWatch) watch() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	f.subs[ch] = true
	return ch, func() { f.mu.Lock(); delete(f.subs, ch); f.mu.Unlock() }
}

func (f *fakeWatch) change() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (f *fakeWatch) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func newEventsServer(t *testing.T) (*httptest.Server, *fakeWatch) {
	t.Helper()
	ops, err := NewOperators(map[string]OperatorToken{"alice": opToken})
	if err != nil {
		t.Fatal(err)
	}
	fw := &fakeWatch{subs: map[chan struct{}]bool{}}
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: &fakeData{}, Gatherer: reg, Watch: fw.watch}))
	t.Cleanup(srv.Close)
	return srv, fw
}

// TestEscalationEvents: an operator's stream gets each change at once; the
// stream ends with its context (the channel closes, the subscription is
// released); no token, no stream.
func TestEscalationEvents(t *testing.T) {
	srv, fw := newEventsServer(t)
	c, err := NewClient(srv.URL, opToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.WatchEscalations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		start := time.Now()
		for fw.count() == 0 {
			time.Sleep(time.Millisecond)
		}
		fw.change()
		select {
		case <-ch:
			if d := time.Since(start); d > time.Second {
				t.Errorf("event after %s", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
	}
	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the channel stays open after the context ended")
	}
	deadline := time.Now().Add(5 * time.Second)
	for fw.count() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := fw.count(); n != 0 {
		t.Errorf("%d subscriptions left", n)
	}

	bad, err := NewClient(srv.URL, "not-the-operator-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	var ae *APIError
	if _, err := bad.WatchEscalations(context.Background()); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("without a valid token: %v, want 401", err)
	}
}

// TestEscalationEventsBounded: past MaxEventStreams the API answers 503.
func TestEscalationEventsBounded(t *testing.T) {
	srv, fw := newEventsServer(t)
	c, err := NewClient(srv.URL, opToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range MaxEventStreams {
		if _, err := c.WatchEscalations(ctx); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	for fw.count() < MaxEventStreams {
		time.Sleep(time.Millisecond)
	}
	var ae *APIError
	if _, err := c.WatchEscalations(ctx); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Errorf("stream %d: %v, want 503", MaxEventStreams+1, err)
	}
}
