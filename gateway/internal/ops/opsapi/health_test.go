package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
)

func serve(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, "/", strings.NewReader(""))
	req.URL, req.RequestURI = u, target
	req.Header.Set("Authorization", "Bearer "+opToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func errorCode(t *testing.T, rec *httptest.ResponseRecorder) ErrorBody {
	t.Helper()
	var eb ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	return eb
}

// TestDatabaseDownIs503: every route that reads the database answers 503
// not_ready with a Retry-After hint, whatever way the database is down.
func TestDatabaseDownIs503(t *testing.T) {
	downErrs := []struct {
		name string
		err  error
	}{
		{"connect refused", fmt.Errorf("listing escalations: %w", &pgconn.ConnectError{})},
		{"admin shutdown", fmt.Errorf("querying audit: %w", &pgconn.PgError{Code: "57P01"})},
		{"connection failure", fmt.Errorf("reading: %w", &pgconn.PgError{Code: "08006"})},
		{"deadline", fmt.Errorf("querying audit: %w", context.DeadlineExceeded)},
		{"network", fmt.Errorf("querying audit: %w", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")})},
		// A read-only database or a full disk refuses the write behind
		// approve and deny: 503 naming the condition, not a 500.
		{"read-only", fmt.Errorf("deciding escalation e1: %w", &pgconn.PgError{Code: "25006", Message: "cannot execute UPDATE in a read-only transaction"})},
		{"disk full", fmt.Errorf("deciding escalation e1: %w", &pgconn.PgError{Code: "53100", Message: "could not extend file"})},
	}
	wantMsg := map[string]string{"read-only": "database read-only (SQLSTATE 25006)", "disk full": "database disk full (SQLSTATE 53100)"}
	for _, de := range downErrs {
		for _, rt := range databaseRoutes {
			t.Run(de.name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				h, esc, data := newTestAPI(t)
				esc.err, data.err = de.err, de.err
				data.calls = []audit.ToolCall{{CallID: "c1"}}
				rec := serve(t, h, rt.method, rt.path)
				if rec.Code != http.StatusServiceUnavailable {
					t.Fatalf("status = %d, want 503: %s", rec.Code, rec.Body)
				}
				if eb := errorCode(t, rec); eb.Error.Code != CodeNotReady {
					t.Fatalf("code = %q, want not_ready", eb.Error.Code)
				}
				if rec.Header().Get("Retry-After") == "" {
					t.Fatal("no Retry-After")
				}
				if w := wantMsg[de.name]; w != "" && !strings.Contains(errorCode(t, rec).Error.Message, w) {
					t.Fatalf("message %q does not name %q", errorCode(t, rec).Error.Message, w)
				}
			})
		}
	}
	t.Run("other errors stay 500", func(t *testing.T) {
		h, _, data := newTestAPI(t)
		data.err = &pgconn.PgError{Code: "42P01"} // undefined table: a bug, not an outage
		if rec := serve(t, h, http.MethodGet, "/v1/sessions"); rec.Code != http.StatusInternalServerError {
			t.Fatalf("status = %d, want 500", rec.Code)
		}
	})
}

// TestBadTextParams: invalid UTF-8 and NUL in a query parameter (or the
// path) are refused with 400 naming the parameter, before any read.
func TestBadTextParams(t *testing.T) {
	tests := []struct {
		name, target, wantMsg string
	}{
		{"nul in session", "/v1/audit/tool-calls?session=a%00b", "session: contains a NUL byte"},
		{"invalid utf-8 in tool", "/v1/audit/tool-calls?tool=%ff%fe", "tool: not valid UTF-8"},
		{"overlong encoding", "/v1/audit/tool-calls?server=%c0%af", "server: not valid UTF-8"},
		{"nul in escalation status", "/v1/escalations?status=pending%00", "status: contains a NUL byte"},
		{"nul in session filter", "/v1/escalations?session=%00", "session: contains a NUL byte"},
		{"unknown parameter still checked", "/v1/sessions?x=%ff", "x: not valid UTF-8"},
		{"bad name", "/v1/sessions?%ff=1", "query parameter name: not valid UTF-8"},
		{"bad percent encoding", "/v1/audit/tool-calls?session=%zz", "query: session is not percent-encoded correctly"},
		{"nul in path id", "/v1/escalations/e%001", "path: contains a NUL byte"},
		{"invalid utf-8 in path id", "/v1/sessions/%ff", "path: not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, esc, data := newTestAPI(t)
			// Reads would fail loudly: the request must not get that far.
			esc.err, data.err = errors.New("reached the database"), errors.New("reached the database")
			rec := serve(t, h, http.MethodGet, tt.target)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400: %s", rec.Code, rec.Body)
			}
			if eb := errorCode(t, rec); eb.Error.Code != CodeBadRequest || eb.Error.Message != tt.wantMsg {
				t.Fatalf("error = %+v, want %q", eb.Error, tt.wantMsg)
			}
		})
	}
}

// blackhole accepts TCP connections and never answers: a paused Postgres.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestReadyzAnswersInTime: /readyz answers 503 within ReadyTimeout (plus
// slack) when the database accepts connections but never answers, when it
// refuses them, and when the probe ignores its context altogether.
func TestReadyzAnswersInTime(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	tests := []struct {
		name  string
		probe func(context.Context) error
	}{
		{"paused database", PGData{Pool: lazyPool(t, blackhole(t), 30)}.Ready},
		{"stopped database", PGData{Pool: lazyPool(t, closedAddr(t), 30)}.Ready},
		{"probe ignores its context", func(context.Context) error { <-hang; return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := NewOperators(map[string]OperatorToken{"alice": opToken})
			if err != nil {
				t.Fatal(err)
			}
			h := New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: probeData{fakeData: &fakeData{}, probe: tt.probe}})
			for i := range 2 { // repeated probes do not pile up or wait longer
				start := time.Now()
				rec := serve(t, h, http.MethodGet, "/readyz")
				took := time.Since(start)
				if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
					t.Fatalf("probe %d: status = %d: %s", i, rec.Code, rec.Body)
				}
				if took > ReadyTimeout+time.Second {
					t.Fatalf("probe %d took %v (deadline %v)", i, took, ReadyTimeout)
				}
			}
		})
	}
}

type probeData struct {
	*fakeData
	probe func(context.Context) error
}

func (p probeData) Ready(ctx context.Context) error { return p.probe(ctx) }

// closedAddr is a local address nothing listens on: a stopped Postgres.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// lazyPool is a pool on addr that connects on first use.
func lazyPool(t *testing.T, addr string, connectTimeoutSeconds int) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://u:p@%s/db?sslmode=disable&connect_timeout=%d", addr, connectTimeoutSeconds))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestDatabaseDownIs503OnRealPool: the errors pgx really returns for a
// stopped database (connection refused) and a paused one (no answer until
// the connect timeout) map to 503 not_ready on every data route.
func TestDatabaseDownIs503OnRealPool(t *testing.T) {
	ops, err := NewOperators(map[string]OperatorToken{"alice": opToken})
	if err != nil {
		t.Fatal(err)
	}
	pools := []struct {
		name string
		pool *pgxpool.Pool
	}{
		{"stopped", lazyPool(t, closedAddr(t), 1)},
		{"paused", lazyPool(t, blackhole(t), 1)},
	}
	for _, p := range pools {
		h := New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: PGData{Pool: p.pool}})
		for _, path := range []string{"/v1/audit/tool-calls?session=s", "/v1/sessions", "/v1/sessions/s1"} {
			t.Run(p.name+" "+path, func(t *testing.T) {
				start := time.Now()
				rec := serve(t, h, http.MethodGet, path)
				if rec.Code != http.StatusServiceUnavailable || errorCode(t, rec).Error.Code != CodeNotReady || rec.Header().Get("Retry-After") == "" {
					t.Fatalf("status = %d %v: %s", rec.Code, rec.Header(), rec.Body)
				}
				if took := time.Since(start); took > DBTimeout {
					t.Fatalf("took %v", took)
				}
			})
		}
	}
}

// FuzzCheckParams: whatever the query string, the middleware never panics,
// and a request it lets through carries only valid, NUL-free text.
func FuzzCheckParams(f *testing.F) {
	for _, s := range []string{"session=a", "session=%00", "a=%ff&b", "%zz=1", "x=1&&y=%e2%80%ae", ""} {
		f.Add(s)
	}
	h := checkParams(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range r.URL.Query() {
			for _, v := range append([]string{k}, vs...) {
				if textProblem(v) != "" {
					panic("bad text let through: " + strconv.Quote(v))
				}
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	f.Fuzz(func(t *testing.T, raw string) {
		req := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d", rec.Code)
		}
	})
}
