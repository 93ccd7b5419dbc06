package console

import (
	"net/http"
	"time"
)

// Event stream bounds.
const (
	// streamMax closes an event stream after this long; the browser
	// reconnects (and the reconnect checks the session again).
	streamMax = 10 * time.Minute
	// heartbeat keeps idle proxies from closing the stream.
	heartbeat = 25 * time.Second
	// writeWait bounds one write to the stream.
	writeWait = 10 * time.Second
)

// events is the server-sent event stream of the escalations page: an
// "escalations" event whenever the escalations' LISTEN/NOTIFY says one was
// opened, decided or expired. The event carries no data from the agent: the
// script re-reads the pending section (rendered and escaped by the server).
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	if c.deps.Watch == nil {
		c.errorPage(w, r, http.StatusNotFound, "No live updates on this gateway.")
		return
	}
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		w.Header().Set("Retry-After", "30")
		c.errorPage(w, r, http.StatusServiceUnavailable, "Too many live views are open.")
		return
	}
	changed, stop := c.deps.Watch()
	defer stop()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
		if _, err := w.Write([]byte(s)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 1000\n: live\n\n") {
		return
	}
	end := time.NewTimer(streamMax)
	defer end.Stop()
	tick := time.NewTicker(heartbeat)
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
			if !send("event: escalations\ndata: changed\n\n") {
				return
			}
		}
	}
}
