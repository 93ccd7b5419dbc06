package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlantAndExists(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "hook")
	var out bytes.Buffer
	if code := run([]string{"plant", "-mode", "0750", path}, strings.NewReader("#!/bin/sh\n"), &out, &out); code != 0 {
		t.Fatalf("plant exit %d: %s", code, out.String())
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o750 {
		t.Fatalf("planted file: %v %v", st, err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{name: "bad mode", args: []string{"plant", "-mode", "9", path}, code: 1},
		{name: "two paths", args: []string{"plant", path, path}, code: 1},
		{name: "unknown command", args: []string{"nope"}, code: 1},
		{name: "no command", args: nil, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if code := run(tt.args, strings.NewReader(""), &b, &b); code != tt.code {
				t.Fatalf("run(%v) = %d, want %d: %s", tt.args, code, tt.code, b.String())
			}
		})
	}
	out.Reset()
	if code := run([]string{"exists", path, filepath.Join(dir, "missing")}, nil, &out, &out); code != 0 {
		t.Fatal(out.String())
	}
	var got map[string]bool
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || !got[path] || got[filepath.Join(dir, "missing")] {
		t.Fatalf("exists = %s (%v)", out.String(), err)
	}
}

func TestDialAll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	got := dialAll([]string{ln.Addr().String(), closedAddr}, time.Second)
	if len(got) != 2 || !got[0].Connected || got[1].Connected || got[1].Error == "" {
		t.Fatalf("dialAll = %+v", got)
	}
}

// TestFetchThroughProxy runs fetch against a tiny forward proxy that
// answers absolute-form requests and refuses CONNECT, and checks that the
// proxy's own answer is reported.
func TestFetchThroughProxy(t *testing.T) {
	var sawAuth string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Proxy-Authorization"); a != "" {
			sawAuth = a
		}
		if r.Method == http.MethodConnect {
			http.Error(w, "refused by the test proxy", http.StatusForbidden)
			return
		}
		if r.URL.Host == "blocked.test" {
			http.Error(w, "not in the allowlist", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte("hello from " + r.URL.Host))
	}))
	defer proxy.Close()
	env := map[string]string{"HTTP_PROXY": strings.Replace(proxy.URL, "http://", "http://s:tok@", 1), "HTTPS_PROXY": proxy.URL}
	getenv := func(k string) string { return env[k] }

	tests := []struct {
		name       string
		url        string
		wantProxy  int
		wantStatus int
		wantText   string
	}{
		{name: "http allowed", url: "http://allowed.test/x", wantProxy: 200, wantStatus: 200, wantText: "hello from allowed.test"},
		{name: "http refused", url: "http://blocked.test/x", wantProxy: 403, wantText: "not in the allowlist"},
		{name: "https refused at CONNECT", url: "https://allowed.test/x", wantProxy: 403, wantText: "refused by the test proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := fetchCmd([]string{"-timeout", "5s", tt.url}, getenv)
			if err != nil {
				t.Fatal(err)
			}
			text := res.Body + res.ProxyBody
			if res.ProxyStatus != tt.wantProxy || res.Status != tt.wantStatus || !strings.Contains(text, tt.wantText) {
				t.Fatalf("fetch %s = %+v", tt.url, res)
			}
		})
	}
	if sawAuth == "" {
		t.Error("the proxy never saw Proxy-Authorization")
	}
	if _, err := fetchCmd([]string{"ftp://x/"}, getenv); err == nil {
		t.Error("fetch accepted an ftp URL")
	}
}
