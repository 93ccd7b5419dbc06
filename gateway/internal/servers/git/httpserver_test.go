package git

import (
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ironcurtain.dev/gateway/internal/testenv"
)

// gitHTTPServer is a smart-HTTP git server over TLS (git http-backend as
// CGI) serving the bare repositories under root. Every request must carry
// the token as Basic credentials; every Authorization header it receives is
// recorded.
type gitHTTPServer struct {
	srv    *httptest.Server
	root   string
	caFile string
	host   string // host:port as git reports it to credential helpers
	token  string

	mu    sync.Mutex
	auths []string
}

func newGitHTTPServer(t testing.TB, root, token string) *gitHTTPServer {
	t.Helper()
	backend := testenv.Require(t, "git-http-backend")
	h := &gitHTTPServer{root: root, token: token}
	cgiHandler := &cgi.Handler{
		Path: backend,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=tester",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent"},
		InheritEnv: []string{"PATH"},
	}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		h.mu.Lock()
		h.auths = append(h.auths, auth)
		h.mu.Unlock()
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
		if auth != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	h.host = strings.TrimPrefix(h.srv.URL, "https://")
	h.caFile = filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	if err := os.WriteFile(h.caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// url returns the https URL of the bare repository name under root.
func (h *gitHTTPServer) url(name string) string { return h.srv.URL + "/" + name }

// sawToken reports whether any request carried the token.
func (h *gitHTTPServer) sawToken() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.auths {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic ")); err == nil && strings.Contains(string(b), h.token) {
			return true
		}
	}
	return false
}

// serveBare makes a bare repository under root, seeded from src's main.
func (h *gitHTTPServer) serveBare(t testing.TB, name, src string) string {
	t.Helper()
	dir := filepath.Join(h.root, name)
	rawGit(t, h.root, "init", "-q", "--bare", dir)
	rawGit(t, dir, "config", "http.receivepack", "true")
	if src != "" {
		rawGit(t, src, "push", "-q", dir, "main:main")
	}
	return dir
}
