// Command ic-e2e-internet is "the internet" of the end-to-end suite: one
// small HTTP(S) server that the suite runs in its own container on the
// gateway's egress network, reachable under several network aliases. It
// routes by host name:
//
//   - git.*   a git smart-HTTP remote (git http-backend through CGI) that
//     requires the gateway's git token (basic auth);
//   - approver.* a deliberately naive auto-approver model (OpenAI chat
//     completions, approver.go) that approves when it finds a prompt
//     injection outside the gateway's data block;
//   - api.*   a fake GitHub API (REST and GraphQL, github.go) that requires
//     the gateway's GitHub token;
//   - mcp.*   a streamable-HTTP MCP server (mcp.go) that requires a
//     bearer token (the gateway's url: mode);
//   - model.* a fake model provider speaking the Anthropic Messages API:
//     it checks that the relay injected the real API key, that no agent
//     credential reached it, and plays a scripted conversation;
//   - any other host: a plain page naming the host it was asked for.
//
// Every request is logged as one JSON line on stdout (never a credential),
// which the suite reads back. It is a test fixture: never deploy it.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Environment variables holding the fixture's secrets (never flags: the
// suite checks that they appear nowhere they should not).
const (
	envModelKey  = "E2E_MODEL_KEY" // the API key the relay must inject
	envGitToken  = "E2E_GIT_TOKEN" // the token git must present
	envForbidden = "E2E_FORBIDDEN" // comma-separated values that must never arrive
	// envMCPToken (mcp.go): the remote MCP server's bearer token.
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ic-e2e-internet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpsAddr := fs.String("https", ":443", "HTTPS listen address")
	httpAddr := fs.String("http", ":80", "plain HTTP listen address")
	certFile := fs.String("cert", "/srv/e2e/tls.crt", "TLS certificate (PEM)")
	keyFile := fs.String("key", "/srv/e2e/tls.key", "TLS private key (PEM)")
	gitRoot := fs.String("git-root", "/srv/git", "directory of the bare repositories")
	repos := fs.String("git-repos", "project,acme/app", "comma-separated bare repositories to create (with a main branch): name or owner/name")
	backend := fs.String("git-http-backend", "/usr/lib/git-core/git-http-backend", "path of git http-backend")
	script := fs.String("model-script", "/srv/e2e/model-script.json", "scripted model conversation (JSON)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil))

	modelKey, gitToken := getenv(envModelKey), getenv(envGitToken)
	if modelKey == "" || gitToken == "" {
		fmt.Fprintf(stderr, "ic-e2e-internet: %s and %s must be set\n", envModelKey, envGitToken)
		return 2
	}
	steps, err := loadScript(*script)
	if err != nil {
		fmt.Fprintf(stderr, "ic-e2e-internet: %v\n", err)
		return 1
	}
	for _, name := range splitList(*repos) {
		if err := createRepo(ctx, *gitRoot, name); err != nil {
			fmt.Fprintf(stderr, "ic-e2e-internet: %v\n", err)
			return 1
		}
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "ic-e2e-internet: loading the TLS key pair: %v\n", err)
		return 1
	}

	h := &handler{
		log:      log,
		model:    &model{key: modelKey, forbidden: splitList(getenv(envForbidden)), steps: steps},
		approver: &approver{key: modelKey},
		git:      &gitRemote{root: *gitRoot, backend: *backend, token: gitToken},
		gh:       newFakeGitHub(gitToken),
		mcp:      newRemoteMCP(getenv(envMCPToken)),
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	tlsLn, err := net.Listen("tcp", *httpsAddr)
	if err != nil {
		fmt.Fprintf(stderr, "ic-e2e-internet: %v\n", err)
		return 1
	}
	plainLn, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		tlsLn.Close()
		fmt.Fprintf(stderr, "ic-e2e-internet: %v\n", err)
		return 1
	}
	secure := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	plain := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- secure.ServeTLS(tlsLn, "", "") }()
	go func() { errc <- plain.Serve(plainLn) }()
	log.Info("listening", "https", tlsLn.Addr().String(), "http", plainLn.Addr().String())

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "ic-e2e-internet: %v\n", err)
			return 1
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = secure.Shutdown(sctx)
	_ = plain.Shutdown(sctx)
	return 0
}

// handler routes by the first label of the requested host.
type handler struct {
	log      *slog.Logger
	model    *model
	approver *approver
	git      *gitRemote
	gh       *fakeGitHub
	mcp      *remoteMCP
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.Host)
	if hst, _, err := net.SplitHostPort(host); err == nil {
		host = hst
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	var note string
	switch label, _, _ := strings.Cut(host, "."); label {
	case "git":
		note = h.git.serve(rec, r)
	case "model":
		note = h.model.serve(rec, r)
	case "approver":
		note = h.approver.serve(rec, r)
	case "api":
		note = h.gh.serve(rec, r)
	case "mcp":
		note = h.mcp.serve(rec, r)
	default:
		note = "page"
		rec.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(rec, "hello from %s (ironcurtain e2e internet)\n", host)
	}
	h.log.Info("request", "host", host, "method", r.Method, "path", r.URL.Path,
		"status", rec.status, "tls", r.TLS != nil, "note", note)
}

// recorder remembers the status code written.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets git http-backend stream through the recorder.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
