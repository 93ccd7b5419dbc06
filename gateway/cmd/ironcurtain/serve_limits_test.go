package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// openIdle opens n TCP connections to addr that never send a byte.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("idle connection %d to %s: %v", i, addr, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// TestServeIdleConnectionsDoNotStarveRealWork: 2,000 idle connections against the agent API
// and 2,000 against the ops API (more than either listener's per-client cap) while a real
// tool call and an operator's approval each still succeed within 100 ms.
func TestServeIdleConnectionsDoNotStarveRealWork(t *testing.T) {
	if soft, _, err := netlimit.RaiseFileLimit(); err != nil || soft < 10000 {
		t.Fatalf("this test needs 10,000 open files (client and server ends of 4,000 connections): soft limit %d, %v", soft, err)
	}
	db := pgtest.New(t, pgtest.Migrated())
	sandbox := t.TempDir()
	policyDir := sandboxPolicy(t, sandbox)
	if err := os.WriteFile(filepath.Join(sandbox, "a.txt"), []byte("note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := runGateway(t, db, sandbox, policyDir)
	agent := connectAgent(t, g.api) // its connections predate the flood, like a working agent's

	rss0, fds0 := processUsage(t)
	openIdle(t, g.api, 2000)
	openIdle(t, g.ops, 2000)
	time.Sleep(200 * time.Millisecond) // let the listeners accept and evict
	rss1, fds1 := processUsage(t)
	// One process holds both ends: the client's 4,000 descriptors, and the gateway's
	// share of them (the connections it still holds; the metric below).
	t.Logf("with 2,000 idle connections per listener: RSS %d -> %d MiB (+%d), open files %d -> %d (both ends)",
		rss0>>20, rss1>>20, (rss1-rss0)>>20, fds0, fds1)
	// The gateway holds at most a client's cap of them; the rest gave way.
	metrics := opsMetrics(t, g.ops)
	for _, want := range []string{
		`ironcurtain_listener_connections_open{listener="agent"}`,
		`ironcurtain_listener_connections_open{listener="ops"}`,
	} {
		v, ok := metricValue(metrics, want)
		if !ok {
			t.Fatalf("metric %s missing", want)
		}
		if v > 1024+8 {
			t.Errorf("%s = %v: idle connections beyond the per-client cap are held", want, v)
		}
		t.Logf("%s %v", want, v)
	}

	// Each figure is the median of several tries, so that one scheduling
	// hiccup on a loaded test machine does not decide it; the flood stays up
	// the whole time.
	var reads []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		r := <-callAsync(agent, "filesystem__read_file", map[string]any{"path": filepath.Join(sandbox, "a.txt")})
		reads = append(reads, time.Since(start))
		if r.err != nil || r.isError || !strings.Contains(r.text, "note") {
			t.Fatalf("read during the flood: %+v", r)
		}
	}
	took := median(reads)
	t.Logf("allowed call with 2,000 idle connections on each listener: median %v of %v", took, reads)
	if took > 100*time.Millisecond {
		t.Errorf("allowed call took %v (median), want < 100ms", took)
	}

	// Approvals: each call comes from a brand-new agent connection (it has to
	// win a place from the idle ones) and is approved through an ops listener
	// with yet more idle connections.
	var approvals []time.Duration
	var seen []string
	for i := 0; i < 3; i++ {
		src := filepath.Join(sandbox, fmt.Sprintf("m%d.txt", i))
		if err := os.WriteFile(src, []byte("move me\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fresh := connectAgent(t, g.api)
		waiting := callAsync(fresh, "filesystem__move_file", map[string]any{
			"source": src, "destination": filepath.Join(sandbox, fmt.Sprintf("moved%d.txt", i))})
		id := pendingEscalation(t, db, seen...)
		seen = append(seen, id)
		openIdle(t, g.ops, 200) // and more idle operators' connections just before the approval
		start := time.Now()
		opsDecide(t, g.ops, id, "approve")
		approvals = append(approvals, time.Since(start))
		select {
		case r := <-waiting:
			if r.err != nil || r.isError {
				t.Fatalf("approved call: %+v", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the approved call did not finish")
		}
	}
	took = median(approvals)
	t.Logf("approval with idle connections on the ops listener: median %v of %v", took, approvals)
	if took > 100*time.Millisecond {
		t.Errorf("approval took %v (median), want < 100ms", took)
	}
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return s[len(s)/2]
}

// processUsage returns this process's resident set size in bytes and its
// number of open file descriptors (Linux; zero elsewhere).
func processUsage(t *testing.T) (rss int64, fds int) {
	t.Helper()
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				var kb int64
				if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil {
					rss = kb << 10
				}
			}
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	return rss, fds
}

func opsMetrics(t *testing.T, ops string) string {
	t.Helper()
	_, body := opsDo(t, ops, http.MethodGet, "/metrics", testOperatorToken)
	return body
}

// opsDo sends method path to the ops listener with token as the bearer
// token and returns the status and the body.
func opsDo(t *testing.T, ops, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+ops+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue returns the value of the sample line starting with series.
func metricValue(metrics, series string) (float64, bool) {
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}

// TestServeRefusesHeldConnections: what a stranger or a hijacked agent sends to hold a
// connection is cut: a body trickled after a 401, an event stream without a session, an
// unsupported method, a JSON-RPC batch.
func TestServeRefusesHeldConnections(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	sandbox := t.TempDir()
	g := runGateway(t, db, sandbox, sandboxPolicy(t, sandbox))

	t.Run("body trickled after a 401 is not drained", func(t *testing.T) {
		c, err := net.Dial("tcp", g.api)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
		// Keep trickling: the server must close the connection instead of reading on.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		closed := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, br)
			closed <- err
		}()
		for i := 0; i < 50; i++ {
			if _, err := c.Write([]byte("a")); err != nil {
				break
			}
			select {
			case err := <-closed:
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("the connection stayed open")
				}
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := <-closed; err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection stayed open while the body trickled")
			}
		}
	})

	for _, tc := range []struct {
		name, method, sid, body string
		status                  int
		want                    string
	}{
		{name: "event stream without a session", method: "GET", status: 400, want: "needs an MCP session"},
		{name: "PUT", method: "PUT", body: "{}", status: 405, want: "GET, POST and DELETE"},
		{name: "PATCH", method: "PATCH", body: "{}", status: 405},
		{name: "batch", method: "POST", body: ` [{"jsonrpc":"2.0","id":1,"method":"ping"}]`, status: 400, want: "batches are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, "http://"+g.api+"/mcp", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+testAgentToken)
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Content-Type", "application/json")
			client := &http.Client{Timeout: 5 * time.Second}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%s: status %d %q, want %d containing %q", tc.method, resp.StatusCode, body, tc.status, tc.want)
			}
			if tc.status == 405 && resp.Header.Get("Allow") != "GET, POST, DELETE" {
				t.Fatalf("Allow = %q", resp.Header.Get("Allow"))
			}
		})
	}
}
