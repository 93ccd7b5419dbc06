package gate

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/tracing"
	"ironcurtain.dev/gateway/policy"
)

// tracerScope names the hub's tracer.
const tracerScope = "ironcurtain.dev/gateway/mcphub"

// Span names of a tool call's trace: the root span per call, with children
// for the policy evaluation, the wait for a human, the audit records and
// the tool's execution.
const (
	spanCall       = "tool_call"
	spanPolicy     = "policy.evaluate"
	spanEscalation = "escalation.wait"
	spanExecute    = "tool.execute"
	spanDecision   = "audit.decision"
	spanOutcome    = "audit.outcome"
)

// startCall starts the span of one tool call (a new trace: trace context
// from the agent is never used) and returns the context the call runs in.
// Its attributes are names and ids, never arguments: see package tracing.
func (g *Gate) startCall(ctx context.Context, sessionID string) (context.Context, trace.Span) {
	if g.tracingOff {
		return ctx, noSpan
	}
	return g.tracer.Start(ctx, spanCall, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.SessionID.String(sessionID)))
}

// child starts a child span of ctx's span, or does nothing when that span
// does not record (tracing off: no allocation on the hot path).
func (g *Gate) child(ctx context.Context, name string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return g.tracer.Start(ctx, name)
}

// noSpan is the span of an untraced step.
var noSpan = trace.SpanFromContext(context.Background())

// traced notes the call's tool and id on its span and keeps its trace id
// for the decision record.
func (c *call) traced(ctx context.Context) {
	c.span = trace.SpanFromContext(ctx)
	if c.g.tracingOff {
		c.span = noSpan // a span in ctx is someone else's
	}
	if !c.span.IsRecording() {
		return
	}
	c.traceID = tracing.TraceID(ctx)
	c.span.SetAttributes(tracing.CallID.String(c.id), tracing.Server.String(c.e.server), tracing.Tool.String(c.e.tool))
}

// evaluate runs the policy under a child span that records the decision.
func (c *call) evaluate(ctx context.Context, eval func(context.Context) policy.Evaluation) policy.Evaluation {
	ctx, span := c.g.child(ctx, spanPolicy)
	ev := eval(ctx)
	if span.IsRecording() {
		span.SetAttributes(decisionAttrs(ev.Decision)...)
		if c.policyVersion != "" {
			span.SetAttributes(tracing.PolicyVer.String(c.policyVersion))
		}
	}
	span.End()
	return ev
}

func decisionAttrs(d policy.Decision) []attribute.KeyValue {
	return []attribute.KeyValue{tracing.Decision.String(d.Status.String()), tracing.Rule.String(tracing.Text(d.Rule))}
}

// auditSpan is the child span of writing e: the write-ahead decision or
// the outcome (other events are not the hub's).
func (g *Gate) auditSpan(ctx context.Context, e audit.Event) (context.Context, trace.Span) {
	switch e.(type) {
	case *audit.ToolCallDecision:
		return g.child(ctx, spanDecision)
	case *audit.ToolCallOutcome:
		return g.child(ctx, spanOutcome)
	}
	return ctx, noSpan
}

// endSpan ends span with err as its status (the error's text stays out of
// the span: it may quote the agent's data; the audit row has it).
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, "failed")
	}
	span.End()
}

// finishSpans ends the execution span, if one runs, and notes the outcome
// on the call's span (ended by the door that started it).
func (c *call) finishSpans(status string, size int) {
	if c.exec != nil {
		if c.exec.IsRecording() && c.ran {
			c.exec.SetAttributes(tracing.ResultBytes.Int(size))
		}
		c.exec.End()
		c.exec = nil
	}
	if c.span == nil || !c.span.IsRecording() {
		return
	}
	c.span.SetAttributes(tracing.Outcome.String(status))
	switch status {
	case audit.OutcomeError, audit.OutcomeTimedOut, audit.OutcomeRefused:
		c.span.SetStatus(codes.Error, status)
	}
}

// endWait ends the span of the wait for a human with the escalation's id
// and what came of it (a status; the human's reason stays out).
func (c *call) endWait(span trace.Span, escID string, res escalation.Result, err error) {
	if span.IsRecording() {
		var status string
		switch res.Status {
		case StatusApproved, StatusDenied, StatusExpired, StatusCancelled:
			status = res.Status // one of ours; anything else is not named
		case "":
			status = StatusDenied
			if res.Approved {
				status = StatusApproved
			}
		default:
			status = "other"
		}
		if err != nil {
			status = "error"
		}
		span.SetAttributes(tracing.EscalationID.String(tracing.Text(escID)), tracing.Escalation.String(status))
	}
	endSpan(span, err)
}
