package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func tracedProxy(t *testing.T, port int) (*testProxy, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return startProxy(t, port, withDeps(func(d *Deps) { d.Tracer = tp.Tracer(tracerScope) })), exp
}

// spanFor waits for the span of the request whose audit event is ev.
func spanFor(t *testing.T, exp *tracetest.InMemoryExporter, ev string) tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID().String() == ev {
				return s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no span of trace %s among %d", ev, len(exp.GetSpans()))
	return tracetest.SpanStub{}
}

func spanAttr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func TestTraceTunnel(t *testing.T) {
	_, port, roots := tlsUpstream(t)
	tp, exp := tracedProxy(t, port)
	c, resp := rawConnect(t, tp.addr, hostPort("example.com", port), basicAuth(tokenS1))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: roots})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(tc, "GET /secret-path?key=CANARY HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(tc); !strings.Contains(string(b), "hello from") {
		t.Fatalf("through the tunnel: %q", b)
	}
	tc.Close()
	ev := tp.sink.wait(t, 1)
	if ev.TraceID == "" {
		t.Fatalf("the tunnel's audit event has no trace id: %+v", ev)
	}
	s := spanFor(t, exp, ev.TraceID)
	want := map[string]string{
		"ironcurtain.egress_kind": "connect", "server.address": "example.com", "server.port": strconv.Itoa(port),
		"ironcurtain.decision": "allow", "ironcurtain.session_id": "s1",
	}
	if s.Name != spanConnect || s.Parent.IsValid() {
		t.Fatalf("span %s (parent %v)", s.Name, s.Parent)
	}
	for k, v := range want {
		if got := spanAttr(s, k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if up, _ := strconv.Atoi(spanAttr(s, "ironcurtain.bytes_up")); up == 0 || int64(up) != ev.BytesUp {
		t.Errorf("bytes_up %q, event %d", spanAttr(s, "ironcurtain.bytes_up"), ev.BytesUp)
	}
	if down, _ := strconv.Atoi(spanAttr(s, "ironcurtain.bytes_down")); down == 0 || int64(down) != ev.BytesDown {
		t.Errorf("bytes_down %q, event %d", spanAttr(s, "ironcurtain.bytes_down"), ev.BytesDown)
	}
}

// A plain request's span has the host and decision, never its path, query,
// headers or the agent's proxy credentials; a refused one says deny.
func TestTracePlainRequests(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "plain") }))
	t.Cleanup(up.Close)
	port := up.Listener.Addr().(*net.TCPAddr).Port
	tp, exp := tracedProxy(t, port)
	client := proxyClient(tp.addr, tokenS1, nil)
	for i, target := range []string{
		"http://example.com:" + strconv.Itoa(port) + "/p?token=CANARY-ghp_0123456789",
		"http://not-allowed.test:" + strconv.Itoa(port) + "/CANARY",
	} {
		req, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer CANARY-header")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ev := tp.sink.wait(t, i+1)
		s := spanFor(t, exp, ev.TraceID)
		wantDecision := []string{"allow", "deny"}[i]
		if s.Name != spanHTTP || spanAttr(s, "ironcurtain.decision") != wantDecision || spanAttr(s, "ironcurtain.decision") != ev.Decision {
			t.Errorf("%s: span %s decision %q, event %q", target, s.Name, spanAttr(s, "ironcurtain.decision"), ev.Decision)
		}
		for _, a := range s.Attributes {
			if v := a.Value.Emit(); strings.Contains(v, "CANARY") || strings.Contains(v, tokenS1) {
				t.Errorf("span attribute %s = %q carries the request's data", a.Key, v)
			}
		}
	}
}

// The host the agent asks for is bounded in the span.
func TestTraceHostileHost(t *testing.T) {
	_, port, _ := tlsUpstream(t)
	tp, exp := tracedProxy(t, port)
	host := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + ".test"
	c, resp := rawConnect(t, tp.addr, hostPort(host, port), basicAuth(tokenS1))
	c.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("CONNECT to an unlisted host succeeded")
	}
	ev := tp.sink.wait(t, 1)
	s := spanFor(t, exp, ev.TraceID)
	if h := spanAttr(s, "server.address"); len(h) > 200 || spanAttr(s, "ironcurtain.decision") != "deny" {
		t.Fatalf("host attribute %q (%d bytes), decision %q", h, len(h), spanAttr(s, "ironcurtain.decision"))
	}
}
