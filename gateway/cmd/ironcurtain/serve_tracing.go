package main

import (
	"context"
	"log/slog"
	"time"

	"ironcurtain.dev/gateway/internal/tracing"
)

// traceFlushTimeout bounds the export of the spans still buffered at
// shutdown.
const traceFlushTimeout = 5 * time.Second

// startTracing turns OpenTelemetry traces on when the standard OTEL_*
// variables ask for them (package tracing) and flushes them when serve
// closes. A bad value stops the start with an error naming the variable; a
// collector that cannot be reached never stops the gateway (spans are
// dropped, and export errors are logged at most once a minute).
func startTracing(ctx context.Context, getenv func(string) string, log *slog.Logger, closers *closeStack) error {
	tp, err := tracing.Setup(ctx, getenv, version)
	if err != nil {
		return err
	}
	if !tp.Settings.Enabled {
		log.Debug("traces off: no OTEL_* variable asks for them")
		return nil
	}
	tracing.LogErrors(log, tracing.DefaultErrorEvery)
	log.Info("traces on: OTLP exporter configured from the OTEL_* variables", "protocol", tp.Settings.Protocol)
	closers.push("trace exporter", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("flushing traces at shutdown failed; the last spans are lost", "err", err)
		}
		return nil
	})
	return nil
}
