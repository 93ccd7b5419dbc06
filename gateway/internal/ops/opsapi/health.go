package opsapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"ironcurtain.dev/gateway/internal/store"
)

// Timeouts of database work behind the ops API.
const (
	// ReadyTimeout bounds /readyz: it answers within it even when the
	// database accepts connections but never answers (paused).
	ReadyTimeout = 2 * time.Second
	// DBTimeout bounds the database work of one ops request; past it the
	// request fails with 503 not_ready.
	DBTimeout = 15 * time.Second
	// retryAfter is the Retry-After hint (seconds) of 503 answers.
	retryAfter = "5"
)

// dbDeadline bounds the database work of a request by DBTimeout.
func dbDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), DBTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// checkParams refuses a request whose path or query parameters hold text
// Postgres cannot take (invalid UTF-8, NUL), naming the parameter, before
// any handler sees it; and a query another reader could take for another
// request: a parameter given twice (readers differ on which one wins) or a
// ';' (some readers split on it). Handlers read the query with params,
// through the same parser.
func checkParams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bad := textProblem(r.URL.Path); bad != "" {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "path: "+bad)
			return
		}
		q, err := parseQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "query: "+err.Error())
			return
		}
		seen := make(map[string]bool, len(q))
		for _, kv := range q {
			if seen[kv[0]] {
				writeError(w, http.StatusBadRequest, CodeBadRequest, paramName(kv[0])+": given more than once")
				return
			}
			seen[kv[0]] = true
		}
		for _, kv := range q {
			if bad := textProblem(kv[0]); bad != "" {
				writeError(w, http.StatusBadRequest, CodeBadRequest, "query parameter name: "+bad)
				return
			}
			if bad := textProblem(kv[1]); bad != "" {
				writeError(w, http.StatusBadRequest, CodeBadRequest, paramName(kv[0])+": "+bad)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// parseQuery splits a raw query into unescaped name/value pairs, in order.
func parseQuery(raw string) ([][2]string, error) {
	var out [][2]string
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		if strings.Contains(part, ";") {
			return nil, errors.New("a ';' is not a parameter separator (use &, or %3B in a value)")
		}
		k, v, _ := strings.Cut(part, "=")
		ku, err := unescapeQuery(k)
		if err != nil {
			return nil, errors.New("a parameter name is not percent-encoded correctly")
		}
		vu, err := unescapeQuery(v)
		if err != nil {
			return nil, errors.New(paramName(ku) + " is not percent-encoded correctly")
		}
		out = append(out, [2]string{ku, vu})
	}
	return out, nil
}

// params is the request's query as checkParams read it (the same parser),
// one value per name; a name the route does not take is refused, named.
func params(r *http.Request, allowed ...string) (map[string]string, error) {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(q))
	for _, kv := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || kv[0] == a
		}
		if !ok {
			return nil, fmt.Errorf("%s: not a parameter of this route (it takes %s)", paramName(kv[0]), strings.Join(allowed, ", "))
		}
		if _, dup := out[kv[0]]; dup {
			return nil, errors.New(paramName(kv[0]) + ": given more than once")
		}
		out[kv[0]] = kv[1]
	}
	return out, nil
}

func unescapeQuery(s string) (string, error) {
	return url.QueryUnescape(s)
}

// paramName is a parameter's name safe to echo in an error.
func paramName(k string) string {
	if textProblem(k) != "" || len(k) > 64 {
		return "a parameter"
	}
	return strings.ToValidUTF8(k, "?")
}

func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// isUnavailable reports whether err means the database could not be
// reached or did not answer in time, as opposed to refusing the request.
func isUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if store.Classify(err) != nil { // read-only, disk full, out of resources, unreachable
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exception; 57P01-57P05: shutting down, cannot
		// connect now, idle session timeout...; 53300: too many clients.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, errNotAnswering)
}

// errNotAnswering is the readiness error when the check did not finish in time.
var errNotAnswering = errors.New("database did not answer in time")

// readiness runs at most one readiness check at a time; callers wait for
// it up to their own deadline, so /readyz answers in time even when the
// check itself hangs (a paused database accepts TCP but never answers,
// and a driver blocked in a read may not honour its context at once).
type readiness struct {
	probe func(context.Context) error

	mu      sync.Mutex
	running *probeRun // the check in flight, nil when none
}

type probeRun struct {
	done chan struct{} // closed when err is set
	err  error
}

func newReadiness(probe func(context.Context) error) *readiness {
	return &readiness{probe: probe}
}

// check returns the result of the check in flight (starting one if none),
// or errNotAnswering when ctx ends first.
func (r *readiness) check(ctx context.Context) error {
	r.mu.Lock()
	run := r.running
	if run == nil {
		run = &probeRun{done: make(chan struct{})}
		r.running = run
		go func() {
			// The probe gets its own deadline: it may outlive this caller.
			pctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
			run.err = r.probe(pctx)
			cancel()
			r.mu.Lock()
			r.running = nil
			r.mu.Unlock()
			close(run.done)
		}()
	}
	r.mu.Unlock()
	select {
	case <-run.done:
		return run.err
	case <-ctx.Done():
		return errNotAnswering
	}
}

// unavailableMessage is the 503 message for err: the condition when it is
// known (read-only, disk full...), so the operator sees why.
func unavailableMessage(err error) string {
	if we := store.Classify(err); we != nil {
		return we.Error() + ": writes fail; retry later"
	}
	return "the database is not available; retry later"
}

// WriteHealthWindow is how long a failed audit write keeps the gateway not
// ready (Deps.WriteHealth): while calls arrive, the audit writer retries at
// least every few seconds and renews it; without calls the write probe
// alone decides once it has passed.
const WriteHealthWindow = 30 * time.Second
