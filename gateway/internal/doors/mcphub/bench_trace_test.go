package mcphub_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/session"
)

// discard is a span exporter that drops what the batcher hands it: the
// cost measured is the gateway's (spans, attributes, the batch queue), not
// a collector's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkHubTracingOverhead makes the benchmark's hub call with tracing
// off (the default: no-op tracer) and on (the SDK with an always-on sampler
// and the production batcher, exporting to nothing), interleaved, and
// reports the medians and the added median per tool call (target ≤ 20 µs).
func BenchmarkHubTracingOverhead(b *testing.B) {
	s := newBenchSetup(b, false)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	deps := s.deps
	deps.Tracer = tp.Tracer("bench")
	traced, err := mcphub.New(mcphub.Config{}, deps)
	if err != nil {
		b.Fatal(err)
	}
	req := mcphub.CallRequest{Session: session.Session{ID: "bench"}, Tool: "filesystem__read_text_file", Args: map[string]any{"path": s.path}}
	off := make([]time.Duration, 0, b.N)
	on := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if r := s.hub.Call(context.Background(), req); r.IsError {
			b.Fatal(r.Content[0].Text)
		}
		t1 := time.Now()
		if r := traced.Call(context.Background(), req); r.IsError {
			b.Fatal(r.Content[0].Text)
		}
		t2 := time.Now()
		off = append(off, t1.Sub(t0))
		on = append(on, t2.Sub(t1))
	}
	offm, onm := median(off), median(on)
	b.ReportMetric(float64(offm.Nanoseconds())/1e3, "off-p50-µs")
	b.ReportMetric(float64(onm.Nanoseconds())/1e3, "on-p50-µs")
	b.ReportMetric(float64((onm-offm).Nanoseconds())/1e3, "added-p50-µs")
}
