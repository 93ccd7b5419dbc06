package egress

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/netpolicy"
)

func TestProxyToken(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   string
		wantOK bool
	}{
		{name: "basic", header: "Basic " + b64("agent:tok"), want: "tok", wantOK: true},
		{name: "basic lower", header: "basic " + b64("agent:tok"), want: "tok", wantOK: true},
		{name: "basic empty user", header: "Basic " + b64(":tok"), want: "tok", wantOK: true},
		{name: "basic colon in password", header: "Basic " + b64("agent:a:b"), want: "a:b", wantOK: true},
		{name: "basic no password", header: "Basic " + b64("tok:"), wantOK: false},
		{name: "basic no colon", header: "Basic " + b64("tok"), wantOK: false},
		{name: "basic bad base64", header: "Basic !!!", wantOK: false},
		{name: "bearer", header: "Bearer tok", want: "tok", wantOK: true},
		{name: "bearer empty", header: "Bearer ", wantOK: false},
		{name: "no scheme", header: "tok", wantOK: false},
		{name: "digest", header: "Digest tok", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := proxyToken(http.Header{"Proxy-Authorization": {tt.header}})
			ok := err == nil
			if ok != tt.wantOK || ok && got != tt.want {
				t.Fatalf("proxyToken(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRawHost(t *testing.T) {
	tests := []struct {
		name string
		head string
		want []string
	}{
		{name: "one", head: "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", want: []string{"a"}},
		{name: "case and spaces", head: "GET http://a/ HTTP/1.1\r\nhOsT:   b.com:80 \r\n\r\n", want: []string{"b.com:80"}},
		{name: "none", head: "GET http://a/ HTTP/1.0\r\nAccept: */*\r\n\r\n"},
		{name: "two", head: "GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", want: []string{"a", "b"}},
		{name: "request line not a field", head: "Host: x\r\nAccept: y\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rawHost([]byte(tt.head))
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("rawHost = %q; want %q", got, tt.want)
			}
		})
	}
}

// FuzzProxyToken: never panics; a token is returned only with ok, and it is
// never empty.
func FuzzProxyToken(f *testing.F) {
	for _, s := range []string{"Basic " + b64("a:b"), "Bearer x", "Basic", "basic  " + b64(":"), "Bearer\t x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := proxyToken(http.Header{"Proxy-Authorization": {h}})
		ok := err == nil
		if ok && tok == "" || !ok && tok != "" {
			t.Fatalf("proxyToken(%q) = %q, %v", h, tok, ok)
		}
	})
}

// FuzzHeadConn: however the head arrives in pieces, the recorder returns
// exactly the bytes up to the first blank line, or nothing when it is longer
// than the limit.
func FuzzHeadConn(f *testing.F) {
	f.Add([]byte("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\nTLSDATA"), uint8(3))
	f.Add([]byte("GET http://a/ HTTP/1.1\r\n\r"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		const limit = 64
		hc := &headConn{limit: limit}
		n := int(step%16) + 1
		for i := 0; i < len(data); i += n {
			end := min(i+n, len(data))
			hc.mu.Lock()
			if !hc.complete {
				hc.record(data[i:end])
			}
			hc.mu.Unlock()
		}
		head, ok := hc.takeHead()
		end := bytes.Index(data, []byte("\r\n\r\n"))
		switch {
		case end >= 0 && end+4 <= limit:
			if !ok || !bytes.Equal(head, data[:end+4]) {
				t.Fatalf("head = %q, %v; want %q", head, ok, data[:end+4])
			}
		default:
			if ok {
				t.Fatalf("head %q returned for an over-long or incomplete head", head)
			}
		}
		if _, again := hc.takeHead(); again {
			t.Fatal("head returned twice")
		}
	})
}

// FuzzSNIMatches: a match means the ClientHello's name canonicalises to the
// CONNECT host and is spelled as the CONNECT spelled it or canonically; an IP
// host never matches a non-empty name.
func FuzzSNIMatches(f *testing.F) {
	f.Add("example.com", "example.com")
	f.Add("EXAMPLE.com", "EXAMPLE.com")
	f.Add("EXAMPLE.com", "example.com")
	f.Add("", "127.0.0.1")
	f.Add("127.0.0.1", "127.0.0.1")
	f.Add("evil.test", "example.com")
	f.Fuzz(func(t *testing.T, sni, host string) {
		h, err := netpolicy.ParseHost(host)
		if err != nil {
			return
		}
		if !sniMatches(sni, h, host) {
			return
		}
		if !h.IsIP() && sni != h.String() && sni != strings.TrimSuffix(host, ".") {
			t.Fatalf("SNI %q matched host %q spelled %q", sni, h, host)
		}
		if h.IsIP() {
			if sni != "" {
				t.Fatalf("IP host %q matched SNI %q", h, sni)
			}
			return
		}
		sh, err := netpolicy.ParseHost(sni)
		if err != nil || sh != h {
			t.Fatalf("SNI %q matched host %q", sni, h)
		}
	})
}
