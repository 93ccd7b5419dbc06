package egress

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/session"
)

// blockingEscalator holds every escalation until its context ends, and
// reports that end.
type blockingEscalator struct {
	called chan struct{}
	ended  chan error
}

func (b *blockingEscalator) Escalate(ctx context.Context, _ escalation.Request) (escalation.Result, error) {
	b.called <- struct{}{}
	<-ctx.Done()
	b.ended <- ctx.Err()
	return escalation.Result{}, ctx.Err()
}

// An agent that hangs up while its CONNECT waits for a human withdraws the
// question: the escalation's context ends (as with net/http, whose
// background read notices the close), instead of waiting for a decision
// nobody will use. Sending early data is not hanging up.
func TestFrontClientGoneDuringEscalation(t *testing.T) {
	port := echoUpstream(t)
	for _, tt := range []struct {
		name     string
		early    string // sent after the head, before the hang-up
		hangUp   bool
		wantDone bool
	}{
		{name: "hang-up", hangUp: true, wantDone: true},
		{name: "half-close", wantDone: true},
		{name: "early bytes, then waiting", early: "\x16\x03\x01", wantDone: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			esc := &blockingEscalator{called: make(chan struct{}, 1), ended: make(chan error, 1)}
			res := netguardtest.NewResolver().Set("new.test", "127.0.0.1")
			tp := startProxy(t, port,
				withConfig(func(c *ProxyConfig) { noSNI(c); c.EscalateUnknownHosts = true; c.Resolver = res }),
				withDeps(func(d *Deps) { d.Escalator = esc }))
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			target := hostPort("new.test", port)
			if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+basicAuth(tokenS1)+"\r\n\r\n"+tt.early); err != nil {
				t.Fatal(err)
			}
			select {
			case <-esc.called:
			case <-time.After(5 * time.Second):
				t.Fatal("no escalation")
			}
			switch {
			case tt.hangUp:
				_ = c.Close()
			case tt.early == "":
				_ = c.(*net.TCPConn).CloseWrite()
			}
			select {
			case err := <-esc.ended:
				if !tt.wantDone {
					t.Fatalf("escalation ended (%v) while the client still waits", err)
				}
			case <-time.After(time.Second):
				if tt.wantDone {
					t.Fatal("the escalation still waits after the client hung up")
				}
			}
		})
	}
}

// Every first request reaches the code that would have served it without
// the front, and gets the answer http.Server gives: the front serves
// well-formed CONNECTs only, and hands everything else over with the bytes
// it read.
func TestFrontRouting(t *testing.T) {
	port := echoUpstream(t)
	target := hostPort("example.com", port)
	auth := "Proxy-Authorization: " + basicAuth(tokenS1) + "\r\n"
	connect := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	for _, tt := range []struct {
		name  string
		head  string
		close bool // half-close after the head
		want  int  // status; 0: closed without an answer
	}{
		{name: "CONNECT", head: connect + auth + "\r\n", want: 200},
		{name: "CONNECT without Host", head: "CONNECT " + target + " HTTP/1.1\r\n" + auth + "\r\n", want: 200},
		{name: "CONNECT HTTP/1.0", head: "CONNECT " + target + " HTTP/1.0\r\n" + auth + "\r\n", want: 200},
		{name: "CONNECT without credentials", head: connect + "\r\n", want: 407},
		{name: "CONNECT to a host nobody allowed", head: "CONNECT evil.test:443 HTTP/1.1\r\n" + auth + "\r\n", want: 403},
		{name: "CONNECT with Expect: 100-continue", head: connect + auth + "Expect: 100-continue\r\n\r\n", want: 200},
		{name: "CONNECT with an unknown Expect", head: connect + auth + "Expect: nothing\r\n\r\n", want: 417},
		{name: "two Host headers", head: connect + "Host: other.test\r\n" + auth + "\r\n", want: 400},
		{name: "malformed Host header", head: "CONNECT " + target + " HTTP/1.1\r\nHost: a b\r\n" + auth + "\r\n", want: 400},
		{name: "invalid header name", head: connect + auth + "Bad Name: x\r\n\r\n", want: 400},
		{name: "invalid header value", head: connect + auth + "X: a\x00b\r\n\r\n", want: 400},
		{name: "no target", head: "CONNECT HTTP/1.1\r\n" + auth + "\r\n", want: 400},
		{name: "HTTP/2 preface", head: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", want: 400},
		{name: "HTTP/0.9", head: "CONNECT " + target + " HTTP/0.9\r\n\r\n", want: 505},
		{name: "head too long", head: connect + auth + "X: " + strings.Repeat("a", DefaultMaxHeaderBytes+8192) + "\r\n\r\n", want: 431},
		{name: "origin-form GET", head: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", want: 400},
		{name: "absolute-form GET to a raw TCP upstream", head: "GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n" + auth + "\r\n", want: 502},
		{name: "CONNECT with a body", head: connect + auth + "Content-Length: 3\r\n\r\nabc", want: 200},
		{name: "head cut short", head: connect, close: true, want: 400},
		{name: "nothing sent", close: true, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, port, withConfig(noSNI))
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			go func() {
				_, _ = io.WriteString(c, tt.head)
				if tt.close {
					_ = c.(*net.TCPConn).CloseWrite()
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if tt.want == 0 {
				if err == nil {
					t.Fatalf("answered %s; want the connection closed", resp.Status)
				}
				return
			}
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status %s; want %d", resp.Status, tt.want)
			}
		})
	}
}

// FuzzFrontMatchesServer: whenever the front keeps a request head for
// itself, http.Server reading the same bytes hands its handler the same
// request. (When the front hands a connection over, the server reads it,
// so there is nothing to compare.)
func FuzzFrontMatchesServer(f *testing.F) {
	for _, seed := range []string{
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.0\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n\x16\x03\x01",
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nHost: b.test\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"CONNECT /path HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"CONNECT http://a.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\nHost: a.test\n\n",
		"connect a.test:443 HTTP/1.1\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	got := make(chan *http.Request, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r
			http.NewResponseController(w).Hijack() //nolint:errcheck // the answer does not matter
		}),
		ReadHeaderTimeout: time.Second,
		MaxHeaderBytes:    4096,
		ErrorLog:          nil,
	}
	srv.SetKeepAlivesEnabled(false)
	ln := newHandoffListener(&net.TCPAddr{})
	go srv.Serve(ln) //nolint:errcheck // ends with the fuzz run
	f.Cleanup(func() { _ = srv.Close() })
	f.Fuzz(func(t *testing.T, head []byte) {
		lr := &limitReader{r: bytes.NewReader(head), n: int64(srv.MaxHeaderBytes) + 4096}
		req, err := http.ReadRequest(bufio.NewReader(lr))
		if err != nil || !frontServes(req, head) {
			return
		}
		client, server := net.Pipe()
		defer client.Close()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = client.Write(head); _ = client.Close() }()
		go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, client) }()
		if !ln.give(server) {
			t.Fatal("server gone")
		}
		var sr *http.Request
		select {
		case sr = <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("the front serves %q; http.Server did not hand it to its handler", head)
		}
		_ = client.Close()
		wg.Wait()
		delete(req.Header, "Host")
		if sr.Method != req.Method || sr.RequestURI != req.RequestURI || sr.Host != req.Host || sr.Proto != req.Proto ||
			sr.URL.String() != req.URL.String() || sr.ContentLength != req.ContentLength || !reflect.DeepEqual(sr.Header, req.Header) {
			t.Fatalf("front and server read %q differently:\nfront  %s %q host %q %v\nserver %s %q host %q %v",
				head, req.Method, req.RequestURI, req.Host, req.Header, sr.Method, sr.RequestURI, sr.Host, sr.Header)
		}
	})
}

// panicAuth panics on its first call, then defers to next.
type panicAuth struct {
	once sync.Once
	next session.Authenticator
}

func (a *panicAuth) Authenticate(ctx context.Context, token string) (session.Session, error) {
	a.once.Do(func() { panic("authenticator bug") })
	return a.next.Authenticate(ctx, token)
}

// A panic while a CONNECT is served ends that connection, as in
// http.Server, not the gateway: the next CONNECT is served, and shutdown
// does not wait for the one that panicked.
func TestFrontPanicEndsOneConnection(t *testing.T) {
	port := echoUpstream(t)
	tp := startProxy(t, port, withConfig(noSNI), withDeps(func(d *Deps) { d.Auth = &panicAuth{next: d.Auth} }))
	target := hostPort("example.com", port)
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nProxy-Authorization: "+basicAuth(tokenS1)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Fatalf("answered %s after a panic; want the connection closed", resp.Status)
	}
	c2, resp := rawConnect(t, tp.addr, target, basicAuth(tokenS1))
	defer c2.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %s after a panic; want 200", resp.Status)
	}
	_ = c2.Close()
	start := time.Now()
	if err := tp.stop(); err != nil || time.Since(start) > time.Second {
		t.Fatalf("shutdown after a panic: %v in %v", err, time.Since(start))
	}
}

// Shutdown closes the connections that have sent no complete head at once
// (as http.Server.Shutdown closes idle ones); a CONNECT that waits for a
// human is ended at the drain timeout, its escalation withdrawn.
func TestFrontShutdown(t *testing.T) {
	port := echoUpstream(t)
	esc := &blockingEscalator{called: make(chan struct{}, 1), ended: make(chan error, 1)}
	res := netguardtest.NewResolver().Set("new.test", "127.0.0.1")
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		noSNI(c)
		c.EscalateUnknownHosts = true
		c.Resolver = res
		c.DrainTimeout = 500 * time.Millisecond
		c.ReadHeaderTimeout = 30 * time.Second
	}), withDeps(func(d *Deps) { d.Escalator = esc }))
	var idle []net.Conn
	for i := range 50 {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i == 0 {
			_, _ = io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\n") // half a head
		}
		idle = append(idle, c)
	}
	waiting, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	target := hostPort("new.test", port)
	_, _ = io.WriteString(waiting, "CONNECT "+target+" HTTP/1.1\r\nProxy-Authorization: "+basicAuth(tokenS1)+"\r\n\r\n")
	select {
	case <-esc.called:
	case <-time.After(5 * time.Second):
		t.Fatal("no escalation")
	}
	start := time.Now()
	if err := tp.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Serve returned after %v; want about the drain timeout (500ms)", d)
	}
	select {
	case <-esc.ended:
	default:
		t.Fatal("the escalation still waits after shutdown")
	}
	for i, c := range append(idle, waiting) {
		if !closedWithin(c, time.Second) {
			t.Fatalf("connection %d still open after shutdown", i)
		}
	}
}

// A CONNECT hijacked with nothing buffered after its head gives the
// handler a reader of its own, so the front's pooled reader goes back to
// the pool (no one else holds it); one hijacked with bytes buffered hands
// over the front's reader, which then stays the handler's.
func TestFrontWriterHijackReader(t *testing.T) {
	lim, err := netlimit.New(netlimit.Limits{MaxConns: 4, MaxPerClient: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		sent     string
		wantKept bool
	}{
		{"nothing buffered", "CONNECT a:443 HTTP/1.1\r\n\r\n", false},
		{"bytes buffered", "CONNECT a:443 HTTP/1.1\r\n\r\nearly", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			go func() { _, _ = io.WriteString(b, tc.sent) }()
			br := bufio.NewReaderSize(a, frontHeadBufSize)
			if _, err := http.ReadRequest(br); err != nil {
				t.Fatal(err)
			}
			w := &frontWriter{c: a, br: br, header: http.Header{}, lim: lim, idle: time.Second}
			_, brw, err := w.Hijack()
			if err != nil {
				t.Fatal(err)
			}
			if w.keptReader != tc.wantKept || (brw.Reader == br) != tc.wantKept {
				t.Fatalf("keptReader %v, handler got the front's reader %v; want both %v", w.keptReader, brw.Reader == br, tc.wantKept)
			}
			if tc.wantKept {
				rest := make([]byte, len("early"))
				if _, err := io.ReadFull(brw.Reader, rest); err != nil || string(rest) != "early" {
					t.Fatalf("buffered bytes %q, %v", rest, err)
				}
			}
		})
	}
}
