package gate

import (
	"context"
	"fmt"
	"time"
)

// Escalation statuses in notices (the escalation package's statuses, and
// what became of the call: interrupted, refused).
const (
	StatusPending   = "pending"
	StatusApproved  = "approved"
	StatusDenied    = "denied"
	StatusExpired   = "expired"
	StatusCancelled = "cancelled"
	// StatusInterrupted: the call stopped waiting because the gateway shuts
	// down; the escalation itself stays pending.
	StatusInterrupted = "interrupted"
	// StatusRefused: the call may not run on the escalation it attached to
	// (its approval already ran another call, or it was decided before).
	StatusRefused = "refused"
)

// EscalationNotice tells the calling client about an escalation its call
// waits on. The MCP door sends it as the data of a notifications/message notice.
type EscalationNotice struct {
	EscalationID string `json:"escalation_id"`
	Tool         string `json:"tool"`
	Status       string `json:"status"`
	Reason       string `json:"reason"`
}

// ProgressText is the message of the progress notifications. It starts with
// "escalation <id>: <status>".
func (n EscalationNotice) ProgressText() string {
	s := fmt.Sprintf("escalation %s: %s", n.EscalationID, n.Status)
	if n.Status == StatusPending {
		s += ", waiting for a human to approve " + n.Tool
	}
	if n.Reason != "" {
		s += " (" + n.Reason + ")"
	}
	return s
}

// Notifier tells the calling client about the escalation its call waits on.
// Implementations must not block for long; failures are ignored (the
// escalation goes on, the notices are a courtesy).
type Notifier interface {
	// Escalation announces a state: pending, then the final status.
	Escalation(ctx context.Context, n EscalationNotice)
	// Waiting is sent periodically while the call waits.
	Waiting(ctx context.Context, n EscalationNotice, waited time.Duration)
}

func notify(ctx context.Context, n Notifier, e EscalationNotice) {
	if n != nil {
		n.Escalation(context.WithoutCancel(ctx), e)
	}
}

// progressLoop calls n.Waiting every interval until the returned stop is
// called. stop waits for the loop to end, so no notice follows the final one.
func progressLoop(ctx context.Context, n Notifier, e EscalationNotice, every time.Duration) (stop func()) {
	if n == nil || every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				n.Waiting(ctx, e, time.Since(start))
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
