package llmrelay

import (
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/tracing"
)

const tracerScope = "ironcurtain.dev/gateway/llmrelay"

// spanCall is the span of one relayed model call, from its authentication
// to its audit record.
const spanCall = "llm_relay.call"

// startSpan starts c's span (a new trace: the agent's trace headers are
// never used, nor sent to the provider) and returns req in its context.
func (r *Relay) startSpan(req *http.Request, c *call) *http.Request {
	if tracing.Off(r.tracer) {
		return req
	}
	ctx, span := r.tracer.Start(req.Context(), spanCall, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.SessionID.String(c.sess.ID), tracing.LLMProvider.String(c.p.up.Provider), tracing.CallID.String(c.id)))
	c.span, c.traceID = span, tracing.TraceID(ctx)
	return req.WithContext(ctx)
}

// endSpan ends c's span with what its audit record says: the model (the
// agent names it: bounded), the upstream's status, the token counts and
// whether it streamed; never the prompt, the answer or the notes.
func endSpan(c *call, ev *audit.LLMCall, returned int) {
	if c.span == nil {
		return
	}
	if c.span.IsRecording() {
		c.span.SetAttributes(
			tracing.Model.String(tracing.Text(ev.Model)), tracing.StatusCode.Int(returned), tracing.Stream.Bool(ev.Stream),
			tracing.InputTokens.Int64(ev.InputTokens), tracing.OutputTokens.Int64(ev.OutputTokens),
		)
		if returned >= 500 {
			c.span.SetStatus(codes.Error, http.StatusText(returned))
		}
	}
	c.span.End()
}
