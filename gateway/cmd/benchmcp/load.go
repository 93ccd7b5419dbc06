package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// okCall is a call the gateway answered with success: what it wrote.
type okCall struct {
	session int
	content string
}

type bearer struct {
	base  http.RoundTripper
	token string
}

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// drive opens n MCP sessions and has each call write_file in a loop for
// warmup+duration; calls that end inside the measured window are timed.
// It returns the run's figures and every successful call.
func drive(ctx context.Context, g *gateway, n int, warmup, duration time.Duration) (result, []okCall, error) {
	tr := &http.Transport{MaxIdleConns: n * 2, MaxIdleConnsPerHost: n * 2, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	sessions := make([]*sdk.ClientSession, n)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		openErr error
	)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := sdk.NewClient(&sdk.Implementation{Name: "benchmcp", Version: "1"}, nil)
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			cs, err := c.Connect(cctx, &sdk.StreamableClientTransport{
				Endpoint:   "http://" + g.api + "/mcp",
				HTTPClient: &http.Client{Transport: bearer{base: tr, token: g.tokens[i]}},
				MaxRetries: -1,
			}, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && openErr == nil {
				openErr = fmt.Errorf("session s%d: connecting: %w", i, err)
			}
			sessions[i] = cs
		}()
	}
	wg.Wait()
	defer func() {
		for _, cs := range sessions {
			if cs != nil {
				_ = cs.Close()
			}
		}
	}()
	if openErr != nil {
		return result{}, nil, openErr
	}
	for i := range n {
		if err := os.MkdirAll(filepath.Join(g.sandbox, "s"+strconv.Itoa(i)), 0o755); err != nil {
			return result{}, nil, fmt.Errorf("session directory: %w", err)
		}
	}

	cpu0 := procCPU(g.cmd.Process.Pid)
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)
	type perSession struct {
		lat    []time.Duration
		ok     []okCall
		errors int
		first  error
	}
	per := make([]perSession, n)
	var cpuFrom, cpuTo time.Duration
	var cpuOnce sync.Once
	go func() { // CPU of the gateway over the measured window only
		select {
		case <-time.After(time.Until(measureFrom)):
			cpuOnce.Do(func() { cpuFrom = procCPU(g.cmd.Process.Pid) })
		case <-ctx.Done():
		}
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &per[i]
			dir := filepath.Join(g.sandbox, "s"+strconv.Itoa(i))
			for k := 0; ; k++ {
				t0 := time.Now()
				if !t0.Before(end) || ctx.Err() != nil {
					return
				}
				content := "benchmcp s" + strconv.Itoa(i) + " c" + strconv.Itoa(k)
				params := &sdk.CallToolParams{Name: "filesystem__write_file", Arguments: map[string]any{
					"path": filepath.Join(dir, "f"+strconv.Itoa(k%8)+".txt"), "content": content,
				}}
				res, err := sessions[i].CallTool(ctx, params)
				t1 := time.Now()
				switch {
				case err != nil:
					p.errors++
					if p.first == nil {
						p.first = err
					}
				case res.IsError:
					p.errors++
					if p.first == nil {
						p.first = fmt.Errorf("tool error: %s", resultText(res))
					}
				default:
					p.ok = append(p.ok, okCall{session: i, content: content})
					if !t0.Before(measureFrom) && t1.Before(end) {
						p.lat = append(p.lat, t1.Sub(t0))
					}
				}
			}
		}()
	}
	wg.Wait()
	cpuTo = procCPU(g.cmd.Process.Pid)
	cpuOnce.Do(func() { cpuFrom = cpu0 })
	var res result
	var lat []time.Duration
	var calls []okCall
	var firstErr error
	for _, p := range per {
		lat = append(lat, p.lat...)
		calls = append(calls, p.ok...)
		res.errors += p.errors
		if firstErr == nil {
			firstErr = p.first
		}
	}
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "benchmcp: %d failed calls; the first: %v\n", res.errors, firstErr)
	}
	res.peakRSS = procHWM(g.cmd.Process.Pid)
	if len(lat) == 0 { // every call refused or failed: 0 calls/s, reported as such
		return res, calls, nil
	}
	slices.Sort(lat)
	res.calls = len(lat)
	res.rate = float64(len(lat)) / duration.Seconds()
	res.p50 = lat[len(lat)/2]
	res.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	res.cpuPerCall = float64((cpuTo - cpuFrom).Microseconds()) / float64(len(lat))
	return res, calls, nil
}

func resultText(r *sdk.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			return t.Text
		}
	}
	return "(no text)"
}

// procCPU is the user+system CPU time of process pid so far.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 { // fields 14 and 15 of stat: utime, stime (ticks)
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / tick
}

// procHWM is the peak resident set size (VmHWM) of process pid, in bytes.
func procHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
