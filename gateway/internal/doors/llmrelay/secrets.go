package llmrelay

import (
	"io"

	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// Model requests are exempt from secret scanning's decision (prompts
// legitimately carry code, keys in it included) but counted: the relay
// scans what a request sends as the body streams through and counts the
// findings per detector (ironcurtain_relay_secret_findings_total). Nothing
// is blocked, recorded per call or logged.

// SecretSource gives the secret scanner in force (*policy.Engine).
type SecretSource interface {
	SecretScanner() *policy.SecretScanner
}

var _ SecretSource = (*policy.Engine)(nil)

// scanOverlap is how much of the text before a chunk is scanned again with
// it, so that a secret across a read boundary is found (the longest
// pattern window, a JWT's, is 4 KiB); findings that end inside the overlap
// were counted with the chunk before.
const scanOverlap = 4 << 10

// countingBody scans a request body chunk by chunk as the relay reads it.
type countingBody struct {
	io.ReadCloser
	det   *secretscan.Detector
	count func(secretscan.Kind)
	tail  []byte
	buf   []byte
}

// countSecrets wraps body so that the secrets it carries are counted.
func (r *Relay) countSecrets(body io.ReadCloser) io.ReadCloser {
	if r.secrets == nil || body == nil {
		return body
	}
	det := r.secrets.SecretScanner().Detector()
	if det == nil {
		return body
	}
	return &countingBody{ReadCloser: body, det: det, count: func(k secretscan.Kind) {
		r.metrics.secrets.WithLabelValues(string(k)).Inc()
	}}
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.scan(p[:n])
	}
	return n, err
}

func (b *countingBody) scan(chunk []byte) {
	b.buf = append(append(b.buf[:0], b.tail...), chunk...)
	old := len(b.tail)
	for _, f := range b.det.Scan(string(b.buf)) {
		if f.End > old {
			b.count(f.Kind)
		}
	}
	keep := min(len(b.buf), scanOverlap)
	b.tail = append(b.tail[:0], b.buf[len(b.buf)-keep:]...)
}
