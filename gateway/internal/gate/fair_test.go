package gate

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFairGateRoundRobin: one session with many waiting stretches does not
// go before another session's one.
func TestFairGateRoundRobin(t *testing.T) {
	g := newFairGate(1)
	hold, err := g.enter(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	queued := 0
	enqueue := func(sess string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leave, err := g.enter(context.Background(), sess)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, sess)
			mu.Unlock()
			leave()
		}()
		queued++
		waitFor(t, "admission state", func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			n := 0
			for _, q := range g.queues {
				n += len(q)
			}
			return n == queued
		})
	}
	for _, s := range []string{"a", "a", "a", "b", "c"} {
		enqueue(s)
	}
	hold()
	wg.Wait()
	if got := strings.Join(order, ","); got != "a,b,c,a,a" {
		t.Fatalf("order = %s, want a,b,c,a,a", got)
	}
	if g.free != 1 || len(g.ring) != 0 || len(g.queues) != 0 {
		t.Fatalf("gate not empty: free %d ring %v queues %v", g.free, g.ring, g.queues)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
