package opsapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Bounds of the escalation event stream (GET /v1/escalations/events).
const (
	// MaxEventStreams bounds the streams open at once; past it the API
	// answers 503 with Retry-After (the client polls meanwhile).
	MaxEventStreams = 64
	// EventStreamMax closes a stream after this long: the client
	// reconnects, and the reconnect checks its operator token again.
	EventStreamMax = 10 * time.Minute
	// eventHeartbeat keeps idle proxies from closing the stream.
	eventHeartbeat = 25 * time.Second
	// eventWriteWait bounds one write to the stream.
	eventWriteWait = 10 * time.Second
)

// EventEscalations is the event the stream sends whenever an escalation
// was opened, decided or expired (any session: the client re-reads its
// listing). It carries no data from the agent.
const EventEscalations = "escalations"

// escalationEvents serves GET /v1/escalations/events as server-sent events:
// "event: escalations" on every change the escalations' LISTEN/NOTIFY
// reports (Deps.Watch), a comment as heartbeat.
func (a *api) escalationEvents(w http.ResponseWriter, r *http.Request) {
	select {
	case a.streams <- struct{}{}:
		defer func() { <-a.streams }()
	default:
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, "too many event streams are open")
		return
	}
	changed, stop := a.deps.Watch()
	defer stop()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		if _, err := io.WriteString(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 1000\n: live\n\n") {
		return
	}
	end := time.NewTimer(EventStreamMax)
	defer end.Stop()
	tick := time.NewTicker(eventHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-tick.C:
			if !send(": keep-alive\n\n") {
				return
			}
		case <-changed:
			if !send("event: " + EventEscalations + "\ndata: changed\n\n") {
				return
			}
		}
	}
}

// maxEventLine bounds one line of the event stream a client reads.
const maxEventLine = 4 << 10

// WatchEscalations opens the escalation event stream. The returned channel
// gets a value (coalesced: it holds at most one) whenever an escalation
// changed, and is closed when the stream ends (ctx done, the server closed
// it, an error): the caller then polls, or watches again.
func (c *Client) WatchEscalations(ctx context.Context) (<-chan struct{}, error) {
	u := *c.base
	u.Path += "/v1/escalations/events"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(c.token))
	req.Header.Set("Accept", "text/event-stream")
	// No client timeout: the stream is long; ctx ends it.
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling ops API: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return nil, &APIError{Status: resp.StatusCode, Code: "http", Message: "no escalation event stream: " + http.StatusText(resp.StatusCode)}
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 512), maxEventLine)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "event: "+EventEscalations {
				continue
			}
			select {
			case ch <- struct{}{}:
			default: // one pending signal is enough
			}
		}
	}()
	return ch, nil
}
