package netlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeAddr is a client address.
type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// fakeConn is a connection from a given client that records being closed.
type fakeConn struct {
	net.Conn
	remote fakeAddr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error {
	c.closed = true
	return nil
}

func TestLimiterAdmitEvictRefuse(t *testing.T) {
	type step struct {
		client  string
		busy    bool // mark the admitted connection active
		admit   bool
		evicted int // total evictions after the step
	}
	tests := []struct {
		name   string
		limits Limits
		steps  []step
	}{
		{
			name:   "idle connections of the same client give way",
			limits: Limits{MaxConns: 10, MaxPerClient: 2},
			steps: []step{
				{client: "a", admit: true},
				{client: "a", admit: true},
				{client: "a", admit: true, evicted: 1},
				{client: "a", admit: true, evicted: 2},
			},
		},
		{
			name:   "busy connections are never evicted",
			limits: Limits{MaxConns: 10, MaxPerClient: 2},
			steps: []step{
				{client: "a", busy: true, admit: true},
				{client: "a", busy: true, admit: true},
				{client: "a", admit: false},
				{client: "b", admit: true},
			},
		},
		{
			name:   "the global cap evicts another client's idle connection",
			limits: Limits{MaxConns: 2, MaxPerClient: 2},
			steps: []step{
				{client: "a", admit: true},
				{client: "b", busy: true, admit: true},
				{client: "c", admit: true, evicted: 1},
				{client: "d", admit: true, evicted: 2},
			},
		},
		{
			name:   "global cap with everything busy refuses",
			limits: Limits{MaxConns: 2, MaxPerClient: 2},
			steps: []step{
				{client: "a", busy: true, admit: true},
				{client: "b", busy: true, admit: true},
				{client: "c", admit: false},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				fc := &fakeConn{remote: fakeAddr(s.client + ":1234")}
				c := l.admit(fc)
				if (c != nil) != s.admit {
					t.Fatalf("step %d (%s): admitted %v, want %v", i, s.client, c != nil, s.admit)
				}
				if c == nil && !fc.closed {
					t.Fatalf("step %d: a refused connection was not closed", i)
				}
				if c != nil && s.busy {
					l.ConnState(c, http.StateActive)
				}
				if got := l.Stats().Evicted; got != uint64(s.evicted) {
					t.Fatalf("step %d: %d evicted, want %d", i, got, s.evicted)
				}
				time.Sleep(time.Millisecond) // distinct idle times
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{MaxConns: 0, MaxPerClient: 1}, "x.max_connections must be > 0"},
		{Limits{MaxConns: 1, MaxPerClient: 0}, "x.max_connections_per_client must be > 0"},
		{Limits{MaxConns: 1, MaxPerClient: 2}, "must not exceed x.max_connections"},
		{Limits{MaxConns: 2, MaxPerClient: 2}, ""},
	} {
		err := tc.l.Validate("x")
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.l, err, tc.want)
		}
	}
}

func TestCloseGivesThePlaceBack(t *testing.T) {
	l, _ := New(Limits{MaxConns: 1, MaxPerClient: 1})
	c := l.admit(&fakeConn{remote: "a:1"})
	l.ConnState(c, http.StateActive)
	if l.admit(&fakeConn{remote: "a:2"}) != nil {
		t.Fatal("admitted beyond the cap")
	}
	_ = c.Close()
	_ = c.Close() // twice: counted once
	if got := l.Stats().Open; got != 0 {
		t.Fatalf("open = %d after close", got)
	}
	if l.admit(&fakeConn{remote: "a:3"}) == nil {
		t.Fatal("the place was not given back")
	}
}

// newServer serves h behind a limiter and Deadlines with budget b.
func newServer(t *testing.T, h http.Handler, b Budget) string {
	t.Helper()
	l, _ := New(Limits{MaxConns: 16, MaxPerClient: 16})
	srv := httptest.NewUnstartedServer(Deadlines(h, func(*http.Request) Budget { return b }))
	srv.Listener = l.Listener(srv.Listener)
	srv.Config.ConnState = l.ConnState
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestDeadlinesCutATrickledBody(t *testing.T) {
	addr := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		fmt.Fprint(w, "read")
	}), Budget{Body: 200 * time.Millisecond, Total: time.Minute})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if _, err := c.Write([]byte("a")); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			break // closed by the server
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a trickled body held the connection for %v (body budget 200ms)", took)
	}
}

func TestDeadlinesLetALongRequestFinish(t *testing.T) {
	// The body is read at once, then the handler waits longer than the body budget (an
	// escalation): the request must not be cancelled by the body's read deadline.
	addr := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			return
		case <-time.After(400 * time.Millisecond):
		}
		fmt.Fprint(w, "done")
	}), Budget{Body: 100 * time.Millisecond, Total: 5 * time.Second})
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" {
		t.Fatalf("got %q: the long request was cut", b)
	}
}

func TestDeadlinesBoundTheWholeExchange(t *testing.T) {
	addr := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := fmt.Fprintln(w, strings.Repeat("x", 1024)); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}), Budget{Body: time.Second, Total: 300 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, _ = io.Copy(io.Discard, bufio.NewReader(c))
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a stream outlived its budget: %v", took)
	}
}

func TestDontDrain(t *testing.T) {
	addr := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		DontDrain(w)
		http.Error(w, "no", http.StatusUnauthorized)
	}), Budget{Body: time.Minute, Total: time.Minute})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc")
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the server kept the connection open after refusing: %v", err)
	}
}

// A connection that never completed a request (a stranger's, or one still to authenticate)
// gives way before an idle keep-alive connection that did (a working client's: refusals close
// their connection), even when the keep-alive one has been idle longer.
func TestLimiterEvictsStrangersFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		client []string // of the working connection, the two strangers, the newcomer
	}{
		{name: "listener cap", limits: Limits{MaxConns: 3, MaxPerClient: 3}, client: []string{"a", "b", "c", "d"}},
		{name: "client cap", limits: Limits{MaxConns: 10, MaxPerClient: 3}, client: []string{"a", "a", "a", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			working := &fakeConn{remote: fakeAddr(tc.client[0] + ":1")}
			wc := l.admit(working)
			l.ConnState(wc, http.StateNew)
			l.ConnState(wc, http.StateActive)
			l.ConnState(wc, http.StateIdle) // served a request, kept alive: idle the longest
			time.Sleep(2 * time.Millisecond)
			var strangers []*fakeConn
			for i := 1; i <= 2; i++ {
				fc := &fakeConn{remote: fakeAddr(tc.client[i] + ":2")}
				c := l.admit(fc)
				l.ConnState(c, http.StateNew)
				strangers = append(strangers, fc)
				time.Sleep(2 * time.Millisecond)
			}
			for i := 0; i < 2; i++ { // two newcomers: both strangers go, the working one stays
				c := l.admit(&fakeConn{remote: fakeAddr(tc.client[3] + ":3")})
				if c == nil {
					t.Fatalf("newcomer %d refused", i)
				}
				l.ConnState(c, http.StateActive) // busy: only the working one is idle after
				if working.closed {
					t.Fatalf("newcomer %d: the served keep-alive connection was evicted before a stranger", i)
				}
				if !strangers[i].closed {
					t.Fatalf("newcomer %d: the oldest stranger was not evicted", i)
				}
			}
			// With no stranger left, the keep-alive connection gives way too.
			if l.admit(&fakeConn{remote: fakeAddr(tc.client[3] + ":4")}) == nil || !working.closed {
				t.Fatal("an idle keep-alive connection did not give way once no stranger was left")
			}
		})
	}
}
