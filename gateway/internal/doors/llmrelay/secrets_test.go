package llmrelay

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

type scannerSource struct{ sc *policy.SecretScanner }

func (s scannerSource) SecretScanner() *policy.SecretScanner { return s.sc }

// Sample secret, assembled at run time so that the repository holds none in one piece.
var sampleAWSKey = "AKIA" + "IOSFODNN7EXAMPLE"

// TestRelaySecretsCountedNotBlocked: a prompt that carries keys is relayed
// unchanged; the findings are counted per detector.
func TestRelaySecretsCountedNotBlocked(t *testing.T) {
	sc, err := policy.NewSecretScanner(policy.SecretScan{})
	if err != nil {
		t.Fatal(err)
	}
	tr := startRelay(t, func(_ *Config, d *Deps) { d.Secrets = scannerSource{sc} })
	prompt := "here is my config: aws_access_key_id=" + sampleAWSKey + " and another " + sampleAWSKey[:19] + "Q"
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 16,
		"messages": []map[string]any{{"role": "user", "content": prompt}}})
	resp, _ := tr.anthropic(t, tokenS1, string(body))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: model requests are never blocked for secrets", resp.StatusCode)
	}
	if got := testutil.ToFloat64(tr.relay.metrics.secrets.WithLabelValues(string(secretscan.KindAWSKeyID))); got != 2 {
		t.Fatalf("counted %v aws-access-key-id findings, want 2", got)
	}
	if !strings.Contains(string(tr.model.last(t).Body), sampleAWSKey) {
		t.Fatal("the prompt was not relayed unchanged")
	}
}

// A key split across two reads is counted once, and a key that lies in the
// overlap of two scans is not counted twice.
func TestCountingBodyAcrossReads(t *testing.T) {
	det := secretscan.MustDefault()
	for _, size := range []int{1, 7, 16, 100, 5000} {
		text := strings.Repeat("x ", 3000) + sampleAWSKey + strings.Repeat(" y", 3000) + " " + sampleAWSKey + " end"
		n := 0
		b := &countingBody{ReadCloser: io.NopCloser(iotest.OneByteReader(bytes.NewReader([]byte(text)))), det: det, count: func(secretscan.Kind) { n++ }}
		if size > 1 {
			b.ReadCloser = io.NopCloser(&chunked{r: strings.NewReader(text), n: size})
		}
		if _, err := io.ReadAll(b); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("reads of %d bytes: counted %d, want 2", size, n)
		}
	}
}

type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }
