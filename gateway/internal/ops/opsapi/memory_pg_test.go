package opsapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/store/pgtest"
	"ironcurtain.dev/gateway/internal/testenv"
)

// memBudget is the growth allowed above idle while audit reads run
// (issue 11: under 100 MB for any audit query).
const memBudget = 100 << 20

// memPeak samples the heap in use and the resident set while f runs and
// returns their peaks above what they were before (after a GC).
func memPeak(t *testing.T, f func()) (heap, rss int64) {
	t.Helper()
	debug.FreeOSMemory() // a GC that also returns freed pages: RSS starts from idle
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0, rss0 := int64(ms.HeapInuse), vmRSS(t)
	var (
		mu       sync.Mutex
		peakHeap = heap0
		peakRSS  = rss0
		stop     = make(chan struct{})
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			r := vmRSS(t)
			mu.Lock()
			peakHeap, peakRSS = max(peakHeap, int64(ms.HeapInuse)), max(peakRSS, r)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peakHeap - heap0, peakRSS - rss0
}

// vmRSS is the process's resident set in bytes.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	kib, err := testenv.ProcStatusKiB("self", "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	return kib << 10
}

// TestAuditReadMemory is the issue 11 scenario: 40 large allowed writes
// (4 MiB arguments, stored cut by this gateway) plus 40 rows stored whole
// by the old code (4 MiB each, as real databases hold them), then the
// worst operator reads: the ops API listing of the session (every page),
// the CLI's query and verify. Growth of the heap and of the RSS above idle
// must stay under memBudget. Run with -v to see the figures.
func TestAuditReadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 160 MiB")
	}
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const rows = 40
	content := strings.Repeat("0123456789abcdef", (4<<20)/16)
	write := func(limits audit.Limits, prefix string) {
		sink, err := audit.NewPG(db.Pool, audit.Options{ArgLimits: limits}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		for i := range rows {
			if err := sink.Record(ctx, &audit.ToolCallDecision{CallID: fmt.Sprintf("%s-%02d", prefix, i), SessionID: "big",
				Server: "filesystem", Tool: "write_file", Decision: "allow", Rule: "sandbox-write", Reason: "inside the sandbox",
				Args: json.RawMessage(`{"path":"/workspace/f` + strconv.Itoa(i) + `","content":"` + content + `"}`)}); err != nil {
				t.Fatal(err)
			}
			if err := sink.Record(ctx, &audit.ToolCallOutcome{CallID: fmt.Sprintf("%s-%02d", prefix, i), SessionID: "big", Status: audit.OutcomeOK}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The old code stored arguments whole and unescaped: store them whole
	// (limits above 4 MiB; no "$" keys, so escaping changes nothing) and
	// mark the rows as written before migration 0005.
	write(audit.Limits{MaxValueBytes: 8 << 20, MaxArgsBytes: 16 << 20}, "old")
	if _, err := db.Pool.Exec(ctx, `UPDATE tool_calls SET args_escaped = false WHERE call_id LIKE 'old-%'`); err != nil {
		t.Fatal(err)
	}
	write(audit.Limits{}, "new")
	var oldBytes, newBytes int64
	if err := db.Pool.QueryRow(ctx, `SELECT sum(octet_length(args)) FILTER (WHERE NOT args_escaped), sum(octet_length(args)) FILTER (WHERE args_escaped)
		FROM tool_calls WHERE session_id = 'big'`).Scan(&oldBytes, &newBytes); err != nil {
		t.Fatal(err)
	}
	if oldBytes < rows*(4<<20) || newBytes > rows*audit.DefaultMaxArgsBytes {
		t.Fatalf("stored: old rows %d bytes, new rows %d bytes", oldBytes, newBytes)
	}

	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	srv := httptest.NewServer(New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: PGData{Pool: db.Pool}}))
	defer srv.Close()

	reads := []struct {
		name string
		read func(t *testing.T) int64 // returns bytes read
	}{
		{"ops API listing, every page", func(t *testing.T) int64 {
			var total int64
			cursor, pages := "", 0
			for {
				q := url.Values{"session": {"big"}, "limit": {"10000"}}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				var page ToolCallPage
				n := fetchPage(t, ctx, srv.URL+"/v1/audit/tool-calls?"+q.Encode(), pages, &page)
				if page.Error != nil {
					t.Fatalf("page %d: %+v", pages, page.Error)
				}
				total += n
				pages++
				if page.Next == "" || len(page.ToolCalls) == 0 {
					return total
				}
				cursor = page.Next
			}
		}},
		{"CLI audit query (all rows)", func(t *testing.T) int64 {
			var total int64
			err := audit.QueryEach(ctx, db.Pool, audit.Filter{Session: "big", Limit: audit.MaxQueryLimit}, func(c *audit.ToolCall) error {
				b, err := json.Marshal(c)
				total += int64(len(b))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return total
		}},
		{"CLI audit verify", func(t *testing.T) int64 {
			// As `ironcurtain audit` runs it (cmd/ironcurtain/audit.go).
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
			checks, err := audit.Verify(ctx, db.Pool, "big")
			if err != nil || len(checks) != 1 || checks[0].Break != nil || checks[0].Records != 4*rows {
				t.Fatalf("verify = %+v, %v", checks, err)
			}
			return oldBytes + newBytes
		}},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			var n int64
			heap, rss := memPeak(t, func() { n = r.read(t) })
			t.Logf("%s: %d bytes read; peak growth above idle: heap %.1f MB, RSS %.1f MB", r.name, n, float64(heap)/1e6, float64(rss)/1e6)
			if heap > memBudget || rss > memBudget {
				t.Fatalf("%s grew the heap by %d and the RSS by %d bytes (budget %d)", r.name, heap, rss, memBudget)
			}
		})
	}
}

// fetchPage GETs target as the operator, decodes the body into page and
// returns its size; the answer must be a 200 whose body decodes and fits
// MaxResponseBytes (pages numbers the page in the messages).
func fetchPage(t *testing.T, ctx context.Context, target string, pages int, page any) int64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := &countingReader{r: resp.Body}
	err = json.NewDecoder(body).Decode(page)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("page %d: %d %v", pages, resp.StatusCode, err)
	}
	if body.n > MaxResponseBytes {
		t.Fatalf("page %d is %d bytes", pages, body.n)
	}
	return body.n
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
