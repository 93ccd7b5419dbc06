package mcphub

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
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

// EscalationLogger is the logger name of escalation notices
// (notifications/message).
const EscalationLogger = "ironcurtain.escalation"

// EscalationNotice tells the calling client about an escalation its call
// waits on. It is the data of the notifications/message notice.
type EscalationNotice struct {
	EscalationID string `json:"escalation_id"`
	Tool         string `json:"tool"`
	Status       string `json:"status"`
	Reason       string `json:"reason"`
}

// progressText is the message of the progress notifications. It starts with
// "escalation <id>: <status>".
func (n EscalationNotice) progressText() string {
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

// mcpNotifier sends notices on the MCP session of the call: a logging
// notification (level notice, logger ironcurtain.escalation, data the
// notice) and, when the request carried a progress token, a progress
// notification with the same information as text.
type mcpNotifier struct {
	srv      *server.MCPServer
	token    mcp.ProgressToken
	progress atomic.Int64
}

func (h *Hub) mcpNotifier(ctx context.Context, req mcp.CallToolRequest) Notifier {
	if server.ClientSessionFromContext(ctx) == nil {
		return nil
	}
	n := &mcpNotifier{srv: h.mcp}
	if req.Params.Meta != nil {
		n.token = req.Params.Meta.ProgressToken
	}
	return n
}

func (m *mcpNotifier) Escalation(ctx context.Context, e EscalationNotice) {
	_ = m.srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationMessage), map[string]any{
		"level":  string(mcp.LoggingLevelNotice),
		"logger": EscalationLogger,
		"data":   e,
	})
	m.sendProgress(ctx, e.progressText())
	if e.Status != StatusPending {
		settle(ctx)
	}
}

// Bounds of settle.
const (
	settleMax   = 200 * time.Millisecond
	settleGrace = 2 * time.Millisecond
)

// settle waits until the transport has taken the session's queued
// notifications, then a little longer. mcp-go's streamable HTTP transport
// drops a notification its forwarder has taken but not yet written when
// the response is written first; the final escalation notice is sent just
// before the response, so without this wait it is often lost.
func settle(ctx context.Context) {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return
	}
	ch := cs.NotificationChannel()
	deadline := time.Now().Add(settleMax)
	for len(ch) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Microsecond)
	}
	time.Sleep(settleGrace)
}

func (m *mcpNotifier) Waiting(ctx context.Context, e EscalationNotice, waited time.Duration) {
	m.sendProgress(ctx, fmt.Sprintf("%s; waited %s", e.progressText(), waited.Round(time.Second)))
}

func (m *mcpNotifier) sendProgress(ctx context.Context, msg string) {
	if m.token == nil {
		return
	}
	_ = m.srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
		"progressToken": m.token,
		"progress":      m.progress.Add(1),
		"message":       msg,
	})
}
