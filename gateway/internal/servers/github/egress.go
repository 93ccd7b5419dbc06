package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/servers"
)

// Egress rows of the github tool server (audit.EgressEvent Kind and Rule).
const (
	egressKind = "github-api"
	egressRule = "github-policy"
)

// maxResponseBytes bounds one API response: the transport reads it whole to
// record its size before the tool sees it.
const maxResponseBytes = 32 << 20

// errNotRecorded marks a request refused or failed because its egress row
// could not be written.
var errNotRecorded = errors.New("github egress not recorded")

// errNoSink refuses a request the gateway could not record.
var errNoSink = fmt.Errorf("%w: the gateway has no audit sink", errNotRecorded)

// egressTransport records one egress row per API request, linked to the
// call being served (servers.NewEgressEvent), before the response reaches
// the tool: every request that leaves is a row linked to the decision that
// let it. A failed write fails the request (and so the call); without a
// sink nothing is sent.
type egressTransport struct {
	base http.RoundTripper
	sink audit.Sink
}

func (t *egressTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if t.sink == nil {
		return nil, errNoSink
	}
	ctx := req.Context()
	port := 443
	if req.URL.Scheme == "http" {
		port = 80
	}
	if p, err := strconv.Atoi(req.URL.Port()); err == nil {
		port = p
	}
	ev := servers.NewEgressEvent(ctx, servers.Egress{Kind: egressKind, Method: req.Method, Host: req.URL.Hostname(), Port: port})
	ev.Decision, ev.Rule, ev.Reason = "allow", egressRule, "the call's policy decision"
	out := req.Clone(ctx)
	var up countingReader
	if req.Body != nil && req.Body != http.NoBody {
		up.r = req.Body
		out.Body = io.NopCloser(&up)
	}
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		ev.BytesUp, ev.Duration, ev.Error = up.n, time.Since(ev.Time), "request failed"
		return nil, errors.Join(err, t.record(ctx, ev))
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	resp.Body.Close()
	ev.BytesUp, ev.BytesDown, ev.Duration = up.n, int64(len(body)), time.Since(ev.Time)
	switch {
	case rerr != nil:
		ev.Error = "reading the response failed"
	case len(body) > maxResponseBytes:
		ev.Error = "response too large"
		rerr = fmt.Errorf("github response larger than %d bytes", maxResponseBytes)
	}
	if err := t.record(ctx, ev); err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

func (t *egressTransport) record(ctx context.Context, ev *audit.EgressEvent) error {
	if err := t.sink.Record(context.WithoutCancel(ctx), ev); err != nil {
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
