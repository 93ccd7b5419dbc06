package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
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

// TestServeExportsTraces runs the gateway with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at a fake OTLP/HTTP collector: a tool call's spans arrive there
// with their names and attributes, and no byte of the call's argument (a
// canary) is in anything the gateway exported.
func TestServeExportsTraces(t *testing.T) {
	const canary = "CANARY-otel-arg-9f8e7d"
	var mu sync.Mutex
	var bodies [][]byte
	spans := map[string]*tracepb.Span{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, b)
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = s
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(collector.Close)
	otel := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_BSP_SCHEDULE_DELAY": "50"}
	for k, v := range otel { // the exporter reads the process environment
		t.Setenv(k, v)
	}
	g := startGateway(t, otel)
	cs := connectAgent(t, g.api)
	res := <-callAsync(cs, "filesystem__read_text_file", map[string]any{"path": "/workspace/" + canary + ".txt"})
	if res.err != nil {
		t.Fatal(res.err)
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		call, ok := spans["tool_call"]
		mu.Unlock()
		if ok {
			attrs := map[string]string{}
			for _, kv := range call.Attributes {
				attrs[kv.Key] = kv.Value.GetStringValue()
			}
			if attrs["ironcurtain.server"] != "filesystem" || attrs["ironcurtain.tool"] != "read_text_file" || attrs["ironcurtain.decision"] == "" || attrs["ironcurtain.outcome"] == "" {
				t.Fatalf("tool_call attributes %v", attrs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no tool_call span reached the collector")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"policy.evaluate", "audit.decision", "audit.outcome"} {
		if _, ok := spans[name]; !ok {
			t.Errorf("no %s span exported", name)
		}
	}
	for _, b := range bodies {
		if bytes.Contains(b, []byte(canary)) {
			t.Fatal("the tool call's argument was exported in a span")
		}
	}
}
