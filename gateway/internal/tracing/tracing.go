// Package tracing is the gateway's OpenTelemetry tracing: a tracer provider
// configured only by the standard OTEL_* environment variables and off when
// they are unset (no exporter, a no-op tracer), a log handler that adds the
// trace id to log lines written inside a recording span, and the attribute
// keys the gateway's spans use.
//
// What goes into a span attribute is decided here and in the packages that
// start spans: names the gateway knows (server, tool, rule, decision,
// outcome), ids it chose (session, call, escalation), hosts, sizes and token
// counts. Never an argument value, a secret, a token or text the agent
// wrote: a trace backend is read by more people, and kept longer, than the
// audit log. A string that may come from the agent (an unknown tool name, a
// requested host) goes through Text, which bounds it.
//
// Trace context sent by the agent is never extracted: the agent is the
// adversary and must not choose the trace its calls land in. Every tool call,
// tunnel and relay call starts its own trace.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of the gateway's spans unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names another.
const ServiceName = "ironcurtain-gateway"

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Settings is what the OTEL_* variables ask of the gateway.
type Settings struct {
	// Enabled is false when no variable asks for traces: then there is no
	// exporter and every tracer is a no-op.
	Enabled bool
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
}

// Environment variables read here (the exporter and the SDK read the rest
// of the standard OTEL_* variables themselves: endpoints, headers,
// timeouts, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, batch settings).
const (
	envSDKDisabled     = "OTEL_SDK_DISABLED"
	envExporter        = "OTEL_TRACES_EXPORTER"
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSampler         = "OTEL_TRACES_SAMPLER"
	envSamplerArgument = "OTEL_TRACES_SAMPLER_ARG"
)

// FromEnv reads the settings. Traces are on when OTEL_TRACES_EXPORTER is
// "otlp", or when it is unset and an OTLP endpoint variable is set; off when
// nothing is set, when OTEL_TRACES_EXPORTER is "none", or when
// OTEL_SDK_DISABLED is true. An unsupported value is an error naming the
// variable (a typo must not silently turn tracing off, nor on).
func FromEnv(getenv func(string) string) (Settings, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if v := get(envSDKDisabled); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return Settings{}, fmt.Errorf("%s: %s is not a boolean", envSDKDisabled, show(v))
		}
		if off {
			return Settings{}, nil
		}
	}
	var s Settings
	switch v := strings.ToLower(get(envExporter)); v {
	case "":
		s.Enabled = get(envEndpoint) != "" || get(envTracesEndpoint) != ""
	case "none":
	case "otlp":
		s.Enabled = true
	default:
		return Settings{}, fmt.Errorf("%s: %s is not supported (otlp or none)", envExporter, show(v))
	}
	if !s.Enabled {
		return Settings{}, nil
	}
	protoVar := envTracesProtocol
	s.Protocol = get(envTracesProtocol)
	if s.Protocol == "" {
		protoVar, s.Protocol = envProtocol, get(envProtocol)
	}
	switch s.Protocol {
	case "":
		s.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return Settings{}, fmt.Errorf("%s: %s is not supported (%s or %s)", protoVar, show(s.Protocol), ProtocolHTTP, ProtocolGRPC)
	}
	if err := checkSampler(get(envSampler), get(envSamplerArgument)); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// checkSampler refuses what the SDK would only log and ignore.
func checkSampler(name, arg string) error {
	switch name {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return fmt.Errorf("%s: %s is not a ratio between 0 and 1", envSamplerArgument, show(arg))
		}
		return nil
	default:
		return fmt.Errorf("%s: %s is not supported (always_on, always_off, traceidratio or their parentbased_ forms)", envSampler, show(name))
	}
}

// enabled is set by Setup when traces are on: Tracer then hands out the
// global provider's tracers, else the no-op tracer.
var enabled atomic.Bool

// Provider is the running tracer provider; Shutdown flushes it.
type Provider struct {
	Settings Settings
	tp       *sdktrace.TracerProvider
}

// Shutdown exports the spans still buffered and stops the exporter. A nil
// Provider or one with traces off has nothing to do.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.tp == nil {
		return nil
	}
	enabled.Store(false)
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutting down the trace exporter: %w", err)
	}
	return nil
}

// Setup reads the settings with getenv and, when traces are on, builds the
// OTLP exporter with contrib's autoexport (which, like the exporter's
// endpoint, headers and timeouts, reads the process environment), a batching tracer provider (the sampler from
// OTEL_TRACES_SAMPLER, parent-based always-on by default) and installs it
// as the global provider. With traces off it installs nothing.
func Setup(ctx context.Context, getenv func(string) string, version string) (*Provider, error) {
	s, err := FromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("reading the OTEL_* settings: %w", err)
	}
	if !s.Enabled {
		return &Provider{Settings: s}, nil
	}
	// autoexport picks the exporter from the same variables FromEnv checked
	// (OTEL_TRACES_EXPORTER unset or "otlp", then the protocol variables),
	// so it builds the OTLP exporter for s.Protocol; the values it would
	// also take ("console", "none") never reach it.
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("building the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("building the trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	enabled.Store(true)
	return &Provider{Settings: s, tp: tp}, nil
}

// Tracer is the tracer a component uses when its dependencies name none:
// the global provider's when Setup turned traces on, else the no-op tracer.
func Tracer(scope string) trace.Tracer {
	if !enabled.Load() {
		return noop.NewTracerProvider().Tracer(scope)
	}
	return otel.GetTracerProvider().Tracer(scope)
}

// TraceID is the id of the trace of ctx's span when that span is sampled
// (its trace reaches the backend), else "". Audit rows carry it.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// MaxText bounds a string attribute that may come from the agent.
const MaxText = 128

// Text is s fit for a span attribute when the agent may have chosen it:
// valid UTF-8, no control characters, at most MaxText bytes.
func Text(s string) string {
	s = cut(s, MaxText)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}

// show is a bad setting's value fit for an error message: quoted, cut,
// without control characters.
func show(v string) string { return strconv.Quote(Text(cut(v, 64))) }

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Off reports whether t is the no-op tracer Tracer hands out when traces
// are off: a hot path then skips starting spans altogether (no context, no
// allocation).
func Off(t trace.Tracer) bool {
	_, off := t.(noop.Tracer)
	return off
}
