package fetch

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A fetch made inside a traced tool call records that call's trace id on
// its egress event; an untraced one records none.
func TestFetchEventCarriesTraceID(t *testing.T) {
	f := newFixture(t, Config{})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("t").Start(context.Background(), "tool_call")
	defer span.End()
	for _, c := range []context.Context{ctx, context.Background()} {
		if _, err := f.srv.Call(c, ToolName, map[string]any{"url": f.url("docs.example.com", "/plain")}); err != nil {
			t.Fatal(err)
		}
	}
	evs := f.sink.all()
	if len(evs) != 2 || evs[0].TraceID != span.SpanContext().TraceID().String() || evs[1].TraceID != "" {
		t.Fatalf("events %+v, want the first with trace %s", evs, span.SpanContext().TraceID())
	}
}
