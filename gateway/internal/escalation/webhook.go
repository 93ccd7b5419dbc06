package escalation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// webhookQueue bounds announcements waiting to be sent; when it is full an
// announcement is dropped, logged and counted (the escalation itself is in
// the database and visible to operators either way).
const webhookQueue = 64

// webhook posts a Slack-compatible message ({"text": ...}) for each new
// escalation, from one goroutine, so a slow or failing endpoint never
// blocks an escalation.
type webhook struct {
	url    string
	client *http.Client
	log    *slog.Logger
	m      *metrics
	queue  chan Escalation
}

func newWebhook(rawURL string, timeout time.Duration, log *slog.Logger, m *metrics) (*webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("webhook url: must be an http(s) URL")
	}
	return &webhook{
		url:    rawURL,
		client: &http.Client{Timeout: timeout},
		log:    log,
		m:      m,
		queue:  make(chan Escalation, webhookQueue),
	}, nil
}

func (w *webhook) announce(e Escalation) {
	select {
	case w.queue <- e:
	default:
		w.m.webhookFailures.WithLabelValues("queue_full").Inc()
		w.log.Warn("escalation webhook queue full; announcement dropped", "escalation", e.ID)
	}
}

func (w *webhook) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-w.queue:
			if err := w.send(ctx, e); err != nil {
				w.log.Warn("escalation webhook failed", "escalation", e.ID, "err", err)
			}
		}
	}
}

// message is the Slack-compatible payload. Arguments are not sent: the
// webhook endpoint is a third party; operators read them on the ops API.
func message(e Escalation) map[string]string {
	what := e.Server + "__" + e.Tool
	if e.Kind == KindEgress {
		what = "egress to " + e.Resource
	}
	text := fmt.Sprintf("IronCurtain: session %s is waiting for approval of %s.\nRule: %s\nReason: %s\nEscalation %s expires at %s.\nDecide with: ironcurtain escalations approve|deny %s",
		e.SessionID, what, e.Rule, e.Reason, e.ID, e.ExpiresAt.UTC().Format(time.RFC3339), e.ID)
	return map[string]string{"text": text}
}

func (w *webhook) send(ctx context.Context, e Escalation) error {
	body, err := json.Marshal(message(e))
	if err != nil {
		w.m.webhookFailures.WithLabelValues("encode").Inc()
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		w.m.webhookFailures.WithLabelValues("request").Inc()
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		w.m.webhookFailures.WithLabelValues("network").Inc()
		return fmt.Errorf("posting webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		w.m.webhookFailures.WithLabelValues("status").Inc()
		return fmt.Errorf("posting webhook: status %d", resp.StatusCode)
	}
	w.m.webhookSent.Inc()
	return nil
}
