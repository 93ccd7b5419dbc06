package mcphub

import (
	"context"
	"errors"
	"fmt"
)

// Shutdown stops the hub and its gate for a gateway stop, promptly:
//
//  1. every call waiting for a human stops waiting at once: its escalation
//     stays pending (it survives for the next gateway), its outcome is
//     recorded (refused, "gateway shutting down; escalation <id> is still
//     pending") and the agent is told to retry after an operator approved;
//     allowed calls that have not started on a server are refused;
//  2. calls already running on a server get Config.ShutdownGrace to finish,
//     then they are cancelled and their outcome recorded;
//  3. once every call has recorded its outcome (its answer is then being
//     written to the agent), the MCP sessions are closed.
//
// The gate is the one every door shares, so calls through the other doors
// stop the same way. ctx bounds the whole; the agent-facing HTTP server
// should be shut down concurrently (it stops accepting at once and waits
// for the answers).
func (h *Hub) Shutdown(ctx context.Context) error {
	h.stopSweep()
	var errs []error
	if err := h.gate.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shutting down MCP hub: %w", err))
	}
	if err := h.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shutting down MCP endpoint: %w", err))
	}
	return errors.Join(errs...)
}
