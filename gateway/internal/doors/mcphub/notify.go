package mcphub

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"ironcurtain.dev/gateway/internal/gate"
)

// EscalationLogger is the logger name of escalation notices
// (notifications/message).
const EscalationLogger = "ironcurtain.escalation"

// mcpNotifier sends notices on the MCP session of the call: a logging
// notification (level notice, logger ironcurtain.escalation, data the
// notice) and, when the request carried a progress token, a progress
// notification with the same information as text.
type mcpNotifier struct {
	srv      *server.MCPServer
	token    mcp.ProgressToken
	progress atomic.Int64
}

func (h *Hub) mcpNotifier(ctx context.Context, req mcp.CallToolRequest) gate.Notifier {
	if server.ClientSessionFromContext(ctx) == nil {
		return nil
	}
	n := &mcpNotifier{srv: h.mcp}
	if req.Params.Meta != nil {
		n.token = req.Params.Meta.ProgressToken
	}
	return n
}

func (m *mcpNotifier) Escalation(ctx context.Context, e gate.EscalationNotice) {
	_ = m.srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationMessage), map[string]any{
		"level":  string(mcp.LoggingLevelNotice),
		"logger": EscalationLogger,
		"data":   e,
	})
	m.sendProgress(ctx, e.ProgressText())
	if e.Status != gate.StatusPending {
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

func (m *mcpNotifier) Waiting(ctx context.Context, e gate.EscalationNotice, waited time.Duration) {
	m.sendProgress(ctx, fmt.Sprintf("%s; waited %s", e.ProgressText(), waited.Round(time.Second)))
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
