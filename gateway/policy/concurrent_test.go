package policy

import (
	"context"
	"sync"
	"testing"
)

// TestConcurrentEvaluate runs mixed calls from several goroutines (run it
// with -race): the engine and the resolver cache are shared.
func TestConcurrentEvaluate(t *testing.T) {
	s := suite{Setup: append(pushSetup(), op{Write: "$SANDBOX/a.txt"})}
	tr := newTree(t)
	tr.apply(t, s.Setup)
	e := tr.engineWith(t, s, withResolver(t, TestResolverConfig{Aged: true})) // let the cache fill
	calls := []struct {
		r    Request
		want Status
	}{
		{r: Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": "a.txt"}}, want: Allow},
		{r: Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": "https://example.org/"}}, want: Escalate},
		{r: Request{Server: "git", Tool: "push", Args: map[string]any{"path": tr.sandbox + "/app", "remote": "origin", "branch": "feature"}}, want: Allow},
		{r: Request{Server: "git", Tool: "push", Args: map[string]any{"path": tr.sandbox + "/app", "branch": "main"}}, want: Deny},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				c := calls[(g+i)%len(calls)]
				if d := e.Evaluate(context.Background(), c.r).Decision; d.Status != c.want {
					errs <- d.Rule + ": " + d.Reason
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}
