package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestStartTracing(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("off when unset", func(t *testing.T) {
		var closers closeStack
		if err := startTracing(context.Background(), func(string) string { return "" }, log, &closers); err != nil {
			t.Fatal(err)
		}
		if len(closers.fns) != 0 {
			t.Fatalf("tracing off pushed closers %v", closers.names)
		}
	})
	t.Run("bad value names the variable", func(t *testing.T) {
		var closers closeStack
		env := map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}
		err := startTracing(context.Background(), func(k string) string { return env[k] }, log, &closers)
		if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
			t.Fatalf("err = %v", err)
		}
	})
}
