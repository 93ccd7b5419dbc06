package netlimit

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// A Budget bounds one request. Long-lived routes (an MCP call waiting for a human, an event
// stream) get a long Total on purpose; every other route a short one.
type Budget struct {
	// Body bounds reading the request body: a body trickled a byte at a time is cut.
	Body time.Duration
	// Total bounds the whole exchange: the response must be written by then.
	Total time.Duration
}

// finalFlush bounds writing what a handler left buffered after it returned.
const finalFlush = 10 * time.Second

// Deadlines sets per-request read and write deadlines on the connection from budget(r).
// While the body is being read the read deadline is Body; once it is read (or when there is
// none) it moves to Total, so that net/http's background read, which watches for the client
// going away, does not cancel a long-lived request early. The server needs no ReadTimeout or
// WriteTimeout of its own (they would cut every long-lived route alike).
func Deadlines(next http.Handler, budget func(*http.Request) Budget) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := budget(r)
		rc := http.NewResponseController(w)
		now := time.Now()
		var end time.Time
		if b.Total > 0 {
			end = now.Add(b.Total)
			_ = rc.SetWriteDeadline(end)
		}
		switch {
		case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 && len(r.TransferEncoding) == 0:
			_ = rc.SetReadDeadline(end)
		case b.Body > 0:
			_ = rc.SetReadDeadline(now.Add(b.Body))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, end: end}
		}
		defer func() {
			// The next request on this connection sets its own; meanwhile bound the flush.
			_ = rc.SetWriteDeadline(time.Now().Add(finalFlush))
		}()
		next.ServeHTTP(w, r)
	})
}

// deadlineBody moves the read deadline from the body's to the exchange's at the body's end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	end  time.Time
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(b.end)
	}
	return n, err
}

// DontDrain marks a refused request's connection to be closed after the response instead of
// reading the rest of its body: net/http otherwise reads up to 256 KiB of an unread body to
// reuse the connection, which a client can trickle a byte at a time after a 401. Call it
// before writing the response.
func DontDrain(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
