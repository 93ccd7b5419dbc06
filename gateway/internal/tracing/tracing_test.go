package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Settings
		wantErr string
	}{
		{name: "unset is off", env: nil, want: Settings{}},
		{name: "service name alone is off", env: map[string]string{"OTEL_SERVICE_NAME": "x"}, want: Settings{}},
		{name: "endpoint turns on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: Settings{Enabled: true, Protocol: ProtocolHTTP}},
		{name: "traces endpoint turns on", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, want: Settings{Enabled: true, Protocol: ProtocolHTTP}},
		{name: "exporter otlp turns on", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: Settings{Enabled: true, Protocol: ProtocolHTTP}},
		{name: "exporter none wins over endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: Settings{}},
		{name: "sdk disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, want: Settings{}},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: Settings{Enabled: true, Protocol: ProtocolGRPC}},
		{name: "traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: Settings{Enabled: true, Protocol: ProtocolHTTP}},
		{name: "sampler ratio", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, want: Settings{Enabled: true, Protocol: ProtocolHTTP}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{name: "bad disabled", env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, wantErr: "OTEL_SDK_DISABLED"},
		{name: "json protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "json traces protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, wantErr: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{name: "unknown sampler", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "jaeger_remote"}, wantErr: "OTEL_TRACES_SAMPLER"},
		{name: "ratio out of range", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, wantErr: "OTEL_TRACES_SAMPLER_ARG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnv(envOf(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// With nothing set, Setup installs nothing and Tracer is the no-op tracer:
// its spans record nothing and carry no trace id.
func TestSetupOffWhenUnset(t *testing.T) {
	p, err := Setup(context.Background(), envOf(nil), "test")
	if err != nil {
		t.Fatal(err)
	}
	if p.Settings.Enabled || p.tp != nil {
		t.Fatalf("tracing on with no OTEL_* variable: %+v", p.Settings)
	}
	ctx, span := Tracer("t").Start(context.Background(), "x")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsValid() || TraceID(ctx) != "" {
		t.Fatal("the tracer of an unset environment records spans")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Setup with an endpoint builds the exporter without contacting it (the
// batcher exports later) and Shutdown returns within its context.
func TestSetupOn(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	p, err := Setup(context.Background(), envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Settings.Enabled || p.tp == nil {
		t.Fatal("tracing off with an endpoint set")
	}
	_, span := Tracer("t").Start(context.Background(), "x")
	if !span.IsRecording() {
		t.Fatal("span not recording with tracing on")
	}
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 1)
	defer cancel()
	_ = p.Shutdown(ctx) // the endpoint is closed: an export error is expected
	if enabled.Load() {
		t.Fatal("Tracer still hands out the global provider after Shutdown")
	}
}

func TestTraceIDAndLogHandler(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "t")

	log.InfoContext(context.Background(), "outside")
	ctx, span := tp.Tracer("t").Start(context.Background(), "x")
	log.InfoContext(ctx, "inside")
	span.End()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines: %q", lines)
	}
	var out, in map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &in); err != nil {
		t.Fatal(err)
	}
	if _, ok := out["trace_id"]; ok {
		t.Fatalf("trace_id outside a span: %s", lines[0])
	}
	want := span.SpanContext().TraceID().String()
	if in["trace_id"] != want || TraceID(ctx) != want || in["component"] != "t" {
		t.Fatalf("inside line %s, want trace_id %s", lines[1], want)
	}
}

func TestText(t *testing.T) {
	for _, s := range []string{"", "fs__read", "a\x00b\nc\x1b[31m", strings.Repeat("é", 200), "bad\xff\xfeutf8", "\u0085next"} {
		got := Text(s)
		if !utf8.ValidString(got) || len(got) > MaxText+len("…") {
			t.Fatalf("Text(%q) = %q", s, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("Text(%q) = %q keeps a control character", s, got)
			}
		}
	}
}

func FuzzText(f *testing.F) {
	f.Add("fs__read")
	f.Add("a\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		if !utf8.ValidString(got) || len(got) > MaxText+len("…") {
			t.Fatalf("Text(%q) = %q", s, got)
		}
	})
}

// FuzzFromEnv: any values parse or fail without panicking; "none" and a
// disabled SDK are always off; an enabled result names a supported
// protocol; an error quotes at most a bounded part of the bad value.
func FuzzFromEnv(f *testing.F) {
	f.Add("otlp", "", "grpc", "traceidratio", "0.5", "")
	f.Add("", "http://c:4318", "", "", "", "false")
	f.Add("none", "http://c:4318", "http/json", "x", "y", "true")
	f.Fuzz(func(t *testing.T, exporter, endpoint, protocol, sampler, arg, disabled string) {
		env := map[string]string{
			"OTEL_TRACES_EXPORTER": exporter, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
			"OTEL_TRACES_SAMPLER": sampler, "OTEL_TRACES_SAMPLER_ARG": arg, "OTEL_SDK_DISABLED": disabled,
		}
		s, err := FromEnv(envOf(env))
		if err != nil {
			if len(err.Error()) > 300 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if s.Enabled && s.Protocol != ProtocolHTTP && s.Protocol != ProtocolGRPC {
			t.Fatalf("enabled with protocol %q", s.Protocol)
		}
		if s.Enabled && strings.EqualFold(strings.TrimSpace(exporter), "none") {
			t.Fatal("OTEL_TRACES_EXPORTER=none turned traces on")
		}
	})
}

func TestErrorLogSummarises(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	e := newErrorLog(slog.New(slog.NewJSONHandler(&buf, nil)), time.Minute, func() time.Time { return now })
	for i := 0; i < 100; i++ { // a collector down: one failure per batch
		e.Handle(errors.New("connection refused"))
		now = now.Add(time.Second)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines for 100 errors in 100 s, want 2: %q", len(lines), lines)
	}
	if !strings.Contains(lines[1], `"errors_since_last_line":59`) {
		t.Fatalf("second line %s", lines[1])
	}
}

// TestSetupOnGRPC: the grpc protocol builds its exporter too (autoexport
// reads the protocol from the process environment, as FromEnv did).
func TestSetupOnGRPC(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	p, err := Setup(context.Background(), envOf(env), "test")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Settings.Enabled || p.Settings.Protocol != ProtocolGRPC || p.tp == nil {
		t.Fatalf("settings = %+v, want grpc traces on", p.Settings)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1)
	defer cancel()
	_ = p.Shutdown(ctx) // nothing listens: an export error is expected
}
