package githttp

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/gitwire"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
)

// uploadPackRefs answers info/refs?service=git-upload-pack: one git__fetch
// of the upstream through the pipeline, whose execution refreshes the
// mirror; then git upload-pack advertises the mirror's refs. An allowed
// fetch grants the session's upload-pack requests for the repository for
// Config.FetchGrant.
func (h *Handler) uploadPackRefs(w http.ResponseWriter, r *http.Request, sess session.Session, rp repo) {
	res := h.d.Hub.Door(r.Context(), mcphub.DoorCall{
		Session: sess, Tool: ToolFetch,
		Args:   map[string]any{"remote": rp.url},
		Record: map[string]any{"door": "git-http", "service": "git-upload-pack"},
		Run: func(ctx context.Context) (servers.Result, error) {
			m, err := h.d.Mirrors.UpstreamMirror(ctx, rp.transport)
			if err != nil {
				return servers.Result{}, err
			}
			start := h.now()
			err = m.Refresh(ctx)
			h.egress(ctx, rp, "fetch", start, 0, err)
			if err != nil {
				return servers.Result{}, err
			}
			return servers.Text("mirror refreshed from " + rp.url), nil
		},
	})
	if !res.Ran || res.Result.IsError {
		writeRefsError(w, "git-upload-pack", fmt.Sprintf("IronCurtain refused fetching %s: %s (call %s)", rp.url, text(res.Result), res.CallID))
		return
	}
	h.grant(sess.ID, rp.url)
	m, err := h.d.Mirrors.UpstreamMirror(r.Context(), rp.transport)
	if err != nil {
		writeRefsError(w, "git-upload-pack", "IronCurtain could not open its mirror of "+rp.url)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
	w.Header().Set("Cache-Control", "no-cache")
	b := gitwire.AppendString(nil, "# service=git-upload-pack\n")
	_, _ = w.Write(gitwire.AppendFlush(b))
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if err := h.streamGit(ctx, w, m.LocalOptions(""), nil, "upload-pack", "--stateless-rpc", "--advertise-refs", m.Dir()); err != nil {
		h.log.Warn("git HTTP door: advertising the mirror's refs failed", "repo", rp.url, "err", err)
	}
}

// uploadPack serves one upload-pack exchange from the mirror, for a
// session holding a fetch grant for the repository.
func (h *Handler) uploadPack(w http.ResponseWriter, r *http.Request, sess session.Session, rp repo) {
	if !h.granted(sess.ID, rp.url) {
		http.Error(w, "IronCurtain: fetch "+rp.url+"/info/refs?service=git-upload-pack first (each fetch is decided there)", http.StatusForbidden)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-git-upload-pack-request" {
		http.Error(w, "expected Content-Type application/x-git-upload-pack-request", http.StatusUnsupportedMediaType)
		return
	}
	body, err := requestBody(r, 64<<20)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnsupportedMediaType)
		return
	}
	defer body.Close()
	m, err := h.d.Mirrors.UpstreamMirror(r.Context(), rp.transport)
	if err != nil {
		http.Error(w, "IronCurtain could not open its mirror of "+rp.url, http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if err := h.streamGit(ctx, w, m.LocalOptions(""), body, "upload-pack", "--stateless-rpc", m.Dir()); err != nil {
		h.log.Warn("git HTTP door: upload-pack failed", "repo", rp.url, "err", err)
	}
}

// streamGit runs git with stdin and streams its stdout to w.
func (h *Handler) streamGit(ctx context.Context, w http.ResponseWriter, o gitexec.Options, stdin io.Reader, args ...string) error {
	o.Stdin = stdin
	cmd, err := gitexec.Command(ctx, o, args...)
	if err != nil {
		return err
	}
	cmd.Stdout = flushWriter{w}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running git %s: %w: %s", args[0], err, stderr.String())
	}
	return nil
}

// grant lets the session's upload-pack requests for url through for
// Config.FetchGrant.
func (h *Handler) grant(sessionID, url string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for k, until := range h.fetc {
		if now.After(until) {
			delete(h.fetc, k)
		}
	}
	h.fetc[grantKey{sessionID, url}] = now.Add(h.cfg.FetchGrant)
}

func (h *Handler) granted(sessionID, url string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	until, ok := h.fetc[grantKey{sessionID, url}]
	return ok && !h.now().After(until)
}

// flushWriter flushes the response after every write (upload-pack streams
// progress and the pack).
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		_ = http.NewResponseController(f.w).Flush()
	}
	return n, err
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
