package egress

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/tracing"
)

const tracerScope = "ironcurtain.dev/gateway/egress"

// Span names: one span per proxied request or CONNECT tunnel, from arrival
// to its audit event.
const (
	spanConnect = "egress.connect"
	spanHTTP    = "egress.http"
)

// startSpan starts st's span (a new trace: the agent's trace headers are
// never used) and returns the context the request is served in.
func (p *Proxy) startSpan(ctx context.Context, st *reqState) context.Context {
	if p.tracingOff {
		return ctx
	}
	name := spanHTTP
	if st.kind == "connect" {
		name = spanConnect
	}
	ctx, st.span = p.tracer.Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer))
	st.traceID = tracing.TraceID(ctx)
	return ctx
}

// endSpan ends a request's span with what its audit event says: the host
// (bounded: the agent chose it), port, session, decision, rule and bytes;
// never the URL path, headers or body, nor the reason or error text.
func endSpan(span trace.Span, ev *audit.EgressEvent) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(
			tracing.Kind.String(ev.Kind),
			tracing.Host.String(tracing.Text(ev.Host)), tracing.Port.Int(ev.Port),
			tracing.SessionID.String(ev.SessionID),
			tracing.Decision.String(ev.Decision), tracing.Rule.String(tracing.Text(ev.Rule)),
			tracing.BytesUp.Int64(ev.BytesUp), tracing.BytesDown.Int64(ev.BytesDown),
		)
		if ev.Error != "" {
			span.SetStatus(codes.Error, "failed")
		}
	}
	span.End()
}
