package githttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/gitmirror"
	"ironcurtain.dev/gateway/internal/gitwire"
	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// receiveCaps are the capabilities the door advertises for a push: no
// push-options, no push certificates, report-status v1.
var receiveCaps = []string{"report-status", "delete-refs", "side-band-64k", "quiet", "atomic", "ofs-delta", "object-format=sha1", "agent=ironcurtain"}

const zeroID = "0000000000000000000000000000000000000000"

// receivePackRefs answers info/refs?service=git-receive-pack: the
// upstream's branches and tags as its own receive-pack advertisement lists
// them (one request, gitmirror.UpstreamMirror.ListForPush). The client
// builds its pack against these refs, so the mirror must hold their
// objects (a thin pack's bases, the classification's ancestry): when it
// lacks one, it is refreshed from the upstream now. The refs are kept for
// the session's push (Handler.show).
func (h *Handler) receivePackRefs(w http.ResponseWriter, r *http.Request, sess session.Session, rp repo) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	start := h.now()
	m, err := h.d.Mirrors.UpstreamMirror(ctx, rp.transport)
	var refs map[string]string
	if err == nil {
		refs, err = h.upstreamRefs(ctx, m, rp)
	}
	if err != nil {
		h.log.Warn("git HTTP door: reading the upstream's refs failed", "repo", rp.url, "err", err)
		writeRefsError(w, "git-receive-pack", "IronCurtain could not read "+rp.url+" from the upstream; the operator can find the detail in the gateway log")
		return
	}
	h.show(sess.ID, rp.transport, refs, start)
	adv := make([]gitwire.AdvertisedRef, 0, len(refs))
	for _, name := range sortedKeys(refs) {
		adv = append(adv, gitwire.AdvertisedRef{ID: refs[name], Name: name})
	}
	w.Header().Set("Content-Type", "application/x-git-receive-pack-advertisement")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(gitwire.AppendAdvertisement(nil, "git-receive-pack", adv, receiveCaps, zeroID))
}

// upstreamRefs reads the upstream's branches and tags for a push and makes
// sure the mirror holds their objects (refreshing it when it lacks one). An
// upstream that cannot be listed with one request (a local test upstream)
// is read by refreshing the mirror.
func (h *Handler) upstreamRefs(ctx context.Context, m *gitmirror.UpstreamMirror, rp repo) (map[string]string, error) {
	list, err := m.ListForPush(ctx, 0)
	if errors.Is(err, gitmirror.ErrNoListing) {
		if err := m.Refresh(ctx); err != nil {
			return nil, err
		}
		h.refreshed(rp.transport)
		return mirrorRefs(ctx, m)
	}
	if err != nil {
		return nil, err
	}
	refs := make(map[string]string, len(list))
	ids := make([]string, 0, len(list))
	for _, ref := range list {
		if strings.HasPrefix(ref.Name, "refs/heads/") || strings.HasPrefix(ref.Name, "refs/tags/") {
			refs[ref.Name] = ref.ID
			ids = append(ids, ref.ID)
		}
	}
	missing, err := m.Missing(ctx, ids)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		h.log.Debug("git HTTP door: the mirror lacks advertised objects; refreshing", "repo", rp.url, "missing", len(missing))
		if err := m.Refresh(ctx); err != nil {
			return nil, err
		}
		h.refreshed(rp.transport)
	}
	return refs, nil
}

// pushState is what one push request has established so far.
type pushState struct {
	h     *Handler
	sess  session.Session
	rp    repo
	req   gitwire.UpdateRequest
	out   *syncBand
	q     *quarantine
	m     *gitmirror.UpstreamMirror
	kinds []policy.RefUpdate
	// secrets are what the push adds that looks like a secret (secrets.go);
	// scan says how much was read, for the record.
	secrets []secretscan.Hit
	scan    map[string]any
	// names are the secrets in the push's ref names and push options,
	// found before any request to the upstream (secrets.go).
	names []secretscan.Hit
	// olds are the upstream's current tips of the updated refs that the
	// mirror holds: what the upstream has (excluded from the connectivity
	// check and the secret scan).
	olds []string
}

// receivePack handles one push.
func (h *Handler) receivePack(w http.ResponseWriter, r *http.Request, sess session.Session, rp repo) {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-git-receive-pack-request" {
		http.Error(w, "expected Content-Type application/x-git-receive-pack-request", http.StatusUnsupportedMediaType)
		return
	}
	// Progress goes out while the pack still comes in.
	_ = http.NewResponseController(w).EnableFullDuplex()
	body, err := requestBody(r, h.cfg.MaxPackBytes+1<<20)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnsupportedMediaType)
		return
	}
	defer body.Close()
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	pr := gitwire.NewReader(body)

	// git probes with a lone flush-pkt before a large push (to get
	// authentication out of the way): answer it, record nothing.
	if isProbe(pr) {
		w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
		return
	}
	p := &pushState{h: h, sess: sess, rp: rp}
	p.req, err = gitwire.ReadUpdateRequest(pr, "sha1", gitwire.Limits{MaxCommands: h.cfg.MaxRefs, DeferRefCheck: true})
	if err != nil {
		callID := p.refuse(r.Context(), policy.RuleInvalidArgument, "malformed push request: "+protocolReason(err))
		msg := "IronCurtain refused the push: " + protocolReason(err) + " (call " + callID + ")"
		netlimit.DontDrain(w)
		refuseRequest(w, p.req.Capabilities, msg)
		return
	}
	p.names = p.scanNames()
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	p.out = newSyncBand(w, p.req.Capabilities)
	statuses := p.run(ctx, r.Context(), pr)
	if p.q != nil {
		p.q.remove()
	}
	rep := gitwire.AppendReport(nil, statuses.unpack, statuses.refs)
	p.out.write(gitwire.BandData, rep)
	p.out.flush()
}

// refuseRequest answers a push whose command list was refused, in a form
// git prints: on the error side band ("remote error: ...") when the client
// asked for one, else as the unpack status of report-status, else as a 400.
func refuseRequest(w http.ResponseWriter, caps gitwire.Capabilities, msg string) {
	switch {
	case caps.Band() > 0:
		w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
		sb := gitwire.NewSideBand(w, caps)
		_ = sb.Write(gitwire.BandError, []byte(gitwire.Sanitize(msg)+"\n"))
		_ = sb.Flush()
	case caps.ReportStatus:
		w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
		_, _ = w.Write(gitwire.AppendReport(nil, msg, nil))
	default:
		http.Error(w, msg, http.StatusBadRequest)
	}
}

// pushResult is the report-status answer.
type pushResult struct {
	unpack string // "" ok
	refs   []gitwire.RefStatus
}

// allRefs reports every ref of the push with the same error.
func (p *pushState) allRefs(unpack, reason string) pushResult {
	res := pushResult{unpack: unpack}
	for _, c := range p.req.Commands {
		res.refs = append(res.refs, gitwire.RefStatus{Ref: c.Ref, Error: reason})
	}
	return res
}

// run takes the push from the pack to the upstream.
func (p *pushState) run(ctx, reqCtx context.Context, pr *gitwire.Reader) pushResult {
	h := p.h
	var err error
	p.m, err = h.d.Mirrors.UpstreamMirror(ctx, p.rp.transport)
	if err != nil {
		h.log.Warn("git HTTP door: opening the mirror failed", "repo", p.rp.url, "err", err)
		id := p.refuse(reqCtx, policy.RuleInternalError, "the gateway could not open its mirror of the repository")
		return p.allRefs("", "the gateway could not open its mirror of the repository (call "+id+")")
	}
	if p.req.NeedsPack() {
		p.out.progress("IronCurtain: receiving the pack into a quarantine")
		start := h.now()
		p.q, err = receivePack(ctx, p.m, pr.Rest(), h.cfg.MaxPackBytes, h.cfg.MaxObjects)
		h.log.Debug("git HTTP door: pack received", "repo", p.rp.url, "took", h.now().Sub(start), "err", err)
		if err != nil {
			var pe *packError
			if !errors.As(err, &pe) {
				h.log.Warn("git HTTP door: receiving the pack failed", "repo", p.rp.url, "err", err)
			}
			reason := packReason(err)
			id := p.refuse(reqCtx, policy.RuleInvalidArgument, "pack refused: "+reason)
			return p.allRefs(reason+" (call "+id+")", "pack refused by IronCurtain")
		}
	} else if n, _ := io.ReadFull(pr.Rest(), make([]byte, 1)); n > 0 {
		id := p.refuse(reqCtx, policy.RuleInvalidArgument, "malformed push request: data after a pack-less command list")
		return p.allRefs("", "malformed push request (call "+id+")")
	}
	// The push is classified against the refs the session was shown by
	// its advertisement (read from the upstream within Config.Fresh, no
	// push to the repository since), else against the mirror refreshed
	// now. A push whose names hold a secret is decided before any request
	// to the upstream: without shown refs it is classified against the
	// mirror as last refreshed. Either way the upstream push is never
	// forced, so an upstream that moved since rejects a non-fast-forward
	// itself.
	refs, shown := h.shownRefs(p.sess.ID, p.rp.transport)
	if !shown {
		if !h.fresh(p.rp.transport) && len(p.names) == 0 {
			if err := p.m.Refresh(ctx); err != nil {
				h.log.Warn("git HTTP door: refreshing the mirror failed", "repo", p.rp.url, "err", err)
				id := p.refuse(reqCtx, policy.RuleInternalError, "the gateway could not read the upstream's refs")
				return p.allRefs("", "IronCurtain could not read the upstream's refs (call "+id+")")
			}
			h.refreshed(p.rp.transport)
		}
		if refs, err = mirrorRefs(ctx, p.m); err != nil {
			h.log.Warn("git HTTP door: reading the mirror's refs failed", "repo", p.rp.url, "err", err)
			id := p.refuse(reqCtx, policy.RuleInternalError, "the push could not be classified")
			return p.allRefs("", "IronCurtain could not classify the push (call "+id+")")
		}
	}
	received := h.now()
	p.kinds, p.olds, err = classify(ctx, p.m, p.q, p.req.Commands, refs)
	h.log.Debug("git HTTP door: push classified", "repo", p.rp.url, "took", h.now().Sub(received))
	if err != nil {
		var ce *classifyError
		if !errors.As(err, &ce) {
			h.log.Warn("git HTTP door: classifying the push failed", "repo", p.rp.url, "err", err)
			id := p.refuse(reqCtx, policy.RuleInternalError, "the push could not be classified")
			return p.allRefs("", "IronCurtain could not classify the push (call "+id+")")
		}
		id := p.refuse(reqCtx, policy.RuleGitPush, "push refused: "+ce.reason)
		return p.allRefs("", ce.reason+" (call "+id+")")
	}
	p.secrets, p.scan, err = p.scanSecrets(ctx)
	if err != nil {
		h.log.Warn("git HTTP door: scanning the push for secrets failed", "repo", p.rp.url, "err", err)
		id := p.refuse(reqCtx, policy.RuleSecretEgress, "the push could not be scanned for secrets")
		return p.allRefs("", "IronCurtain could not scan the push for secrets (call "+id+")")
	}
	return p.decideAndPush(reqCtx)
}

// decideAndPush is the one decision of the push and, when allowed, the push
// upstream, both through the hub's pipeline.
func (p *pushState) decideAndPush(ctx context.Context) pushResult {
	reports := make(chan []gitwire.RefStatus, 1)
	res := p.h.d.Gate.Do(ctx, gate.Call{
		Session: p.sess, Tool: ToolPush,
		Push:   &policy.WirePush{URL: p.rp.url, Updates: p.kinds, Secrets: p.secrets},
		Record: p.record(),
		Notify: bandNotifier{out: p.out},
		Run: func(ctx context.Context) (servers.Result, error) {
			return p.pushUpstream(ctx, reports)
		},
	})
	if !res.Ran {
		reason := text(res.Result)
		if res.Decision.Status == policy.Deny {
			reason = p.refRefusal(res.Decision.Reason)
		}
		p.out.progress("IronCurtain: " + reason)
		return p.allRefs("", reason+" (call "+res.CallID+")")
	}
	select {
	case refs := <-reports:
		return pushResult{refs: refs}
	default:
		// The upstream push did not finish (timed out or cancelled).
		return p.allRefs("", text(res.Result)+" (call "+res.CallID+")")
	}
}

// record is what the push's record says beside the policy's arguments.
func (p *pushState) record() map[string]any {
	rec := map[string]any{"claimed": p.claims(), "atomic": p.req.Capabilities.Atomic}
	if p.scan != nil {
		rec["secret_scan"] = p.scan
	}
	return rec
}

// refRefusal shortens a policy refusal for a ref line.
func (p *pushState) refRefusal(reason string) string {
	reason = strings.TrimPrefix(reason, "push refused: ")
	return "IronCurtain policy: " + reason
}

// pushUpstream pushes the judged updates from the mirror (objects from the
// quarantine) and reports per ref.
func (p *pushState) pushUpstream(ctx context.Context, reports chan<- []gitwire.RefStatus) (servers.Result, error) {
	var specs []string
	for _, c := range p.req.Commands {
		if c.IsDelete() {
			// The invariants refuse deletion; never reach the upstream with one.
			return servers.Result{}, errors.New("a deletion reached the upstream push")
		}
		specs = append(specs, c.New+":"+c.Ref)
	}
	p.out.progress("IronCurtain: pushing to " + p.rp.url)
	start := p.h.now()
	report, err := p.m.Push(ctx, specs, p.req.Capabilities.Atomic, p.q.path())
	p.h.stale(p.rp.transport) // the upstream moved: the next push reads it again
	p.h.egress(ctx, p.rp, "push", start, p.q.size(), err)
	p.h.log.Debug("git HTTP door: pushed upstream", "repo", p.rp.url, "took", p.h.now().Sub(start), "err", err)
	refs := parsePorcelain(report, p.req.Commands)
	reports <- refs
	if err == nil && p.q != nil {
		if merr := p.q.migrate(); merr != nil {
			p.h.log.Warn("git HTTP door: keeping the pushed objects in the mirror failed", "repo", p.rp.url, "err", merr)
		}
	}
	if err != nil {
		p.h.log.Warn("git HTTP door: the upstream push failed", "repo", p.rp.url, "err", err)
		return servers.ToolError("the upstream refused or failed the push: " + gitwire.Sanitize(report)), nil
	}
	return servers.Text(report), nil
}

// claims lists the client's commands as sent (for the record).
func (p *pushState) claims() []any {
	out := make([]any, len(p.req.Commands))
	for i, c := range p.req.Commands {
		out[i] = c.Old + " " + c.New + " " + c.Ref
	}
	return out
}

// refuse records the door's refusal of the push and returns the call id.
func (p *pushState) refuse(ctx context.Context, rule, reason string) string {
	rec := map[string]any{"remote": p.rp.url, "door": "git-http"}
	if len(p.req.Commands) > 0 {
		rec["claimed"] = p.claims()
	}
	res := p.h.d.Gate.Do(ctx, gate.Call{Session: p.sess, Tool: ToolPush,
		Refused: &policy.Decision{Status: policy.Deny, Rule: rule, Reason: reason}, Record: rec})
	return res.CallID
}

// parsePorcelain turns git push --porcelain output into a status per
// command; a command the report does not mention failed.
func parsePorcelain(report string, cmds []gitwire.Command) []gitwire.RefStatus {
	got := map[string]string{}
	for _, line := range strings.Split(report, "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 || len(f[0]) != 1 {
			continue
		}
		_, dst, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if f[0] == "!" {
			got[dst] = "upstream rejected: " + strings.Trim(f[2], " ")
		} else {
			got[dst] = ""
		}
	}
	out := make([]gitwire.RefStatus, len(cmds))
	for i, c := range cmds {
		e, ok := got[c.Ref]
		if !ok {
			e = "the upstream push failed"
		}
		out[i] = gitwire.RefStatus{Ref: c.Ref, Error: e}
	}
	return out
}

// isProbe reports whether the body is git's lone flush-pkt probe.
func isProbe(pr *gitwire.Reader) bool {
	br, ok := pr.Rest().(interface{ Peek(int) ([]byte, error) })
	if !ok {
		return false
	}
	b, err := br.Peek(5)
	return len(b) == 4 && string(b) == "0000" && errors.Is(err, io.EOF)
}

// protocolReason is the short form of a request parsing error.
func protocolReason(err error) string {
	msg := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "the request ended inside a pkt-line (truncated)"
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Sprintf("the request exceeds %d bytes", mbe.Limit)
	}
	msg = strings.TrimPrefix(msg, "reading the command list: ")
	return gitwire.Sanitize(strings.TrimPrefix(msg, gitwire.ErrProtocol.Error()+": "))
}

func text(r servers.Result) string {
	for _, c := range r.Content {
		if c.Type == "text" {
			return strings.TrimPrefix(c.Text, "refused: ")
		}
	}
	return "refused"
}

// writeRefsError answers an info/refs request with git's ERR packet, which
// git prints as "remote error: <msg>".
func writeRefsError(w http.ResponseWriter, service, msg string) {
	w.Header().Set("Content-Type", "application/x-"+service+"-advertisement")
	w.Header().Set("Cache-Control", "no-cache")
	b := gitwire.AppendString(nil, "# service="+service+"\n")
	b = gitwire.AppendFlush(b)
	b = gitwire.AppendString(b, "ERR "+gitwire.Sanitize(msg)+"\n")
	_, _ = w.Write(b)
}

// syncBand is the side band of one response, safe for the escalation
// notices' goroutine, flushed after every write.
type syncBand struct {
	mu sync.Mutex
	w  http.ResponseWriter
	sb *gitwire.SideBand
}

func newSyncBand(w http.ResponseWriter, caps gitwire.Capabilities) *syncBand {
	return &syncBand{w: w, sb: gitwire.NewSideBand(w, caps)}
}

func (s *syncBand) write(band byte, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.sb.Write(band, p)
	_ = http.NewResponseController(s.w).Flush()
}

func (s *syncBand) progress(msg string) {
	s.write(gitwire.BandProgress, []byte(gitwire.Sanitize(msg)+"\n"))
}

func (s *syncBand) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.sb.Flush()
	_ = http.NewResponseController(s.w).Flush()
}

// bandNotifier shows escalation notices on the side band.
type bandNotifier struct{ out *syncBand }

func (n bandNotifier) Escalation(_ context.Context, e gate.EscalationNotice) {
	switch e.Status {
	case gate.StatusPending:
		msg := "IronCurtain: waiting for approval of " + e.EscalationID
		if e.Reason != "" {
			msg += " (" + e.Reason + ")"
		}
		n.out.progress(msg)
	default:
		msg := "IronCurtain: escalation " + e.EscalationID + " " + e.Status
		if e.Reason != "" {
			msg += ": " + e.Reason
		}
		n.out.progress(msg)
	}
}

func (n bandNotifier) Waiting(_ context.Context, e gate.EscalationNotice, waited time.Duration) {
	n.out.progress(fmt.Sprintf("IronCurtain: still waiting for approval of %s (%s)", e.EscalationID, waited.Round(time.Second)))
}

var _ gate.Notifier = bandNotifier{}
