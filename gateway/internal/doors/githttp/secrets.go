package githttp

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/gitscan"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// SecretSource gives the secret scanner in force (*policy.Engine).
type SecretSource interface {
	SecretScanner() *policy.SecretScanner
}

var _ SecretSource = (*policy.Engine)(nil)

// detector is the detector in force (nil: no scanning).
func (h *Handler) detector() *secretscan.Detector {
	if h.d.Secrets == nil {
		return nil
	}
	return h.d.Secrets.SecretScanner().Detector()
}

// withheldPath stands for a repository path that holds a secret, in
// records and answers.
const withheldPath = "<path withheld: it holds a secret>"

// pathRefused refuses (and records, as structural-secret-egress) a request
// whose repository path holds a secret, before any request to the upstream:
// every request for the repository, the mirror's refresh included, would
// send the path there. It is refused rather than escalated: git's ref
// advertisement cannot wait for a human, and no repository needs a secret
// in its name. Neither the record nor the answer holds the path.
func (h *Handler) pathRefused(w http.ResponseWriter, r *http.Request, sess session.Session, rp repo, service string, refs bool) bool {
	hits := h.detector().ScanURL(rp.url)
	if len(hits) == 0 {
		return false
	}
	var found []string
	for _, hit := range hits {
		found = append(found, string(hit.Kind)+" in the "+hit.Where)
	}
	reason := "the repository path holds a secret (" + strings.Join(found, "; ") + "); nothing was sent to the upstream"
	d, _ := h.d.Secrets.SecretScanner().Decide("the repository URL", hits)
	d.Status, d.Reason = policy.Deny, reason
	tool := ToolFetch
	if service == "git-receive-pack" {
		tool = ToolPush
	}
	withheld := "https://" + rp.host + "/" + withheldPath
	res := h.d.Gate.Do(r.Context(), gate.Call{Session: sess, Tool: tool, Refused: &d,
		Record: map[string]any{"remote": withheld, "door": "git-http", "service": service}})
	msg := fmt.Sprintf("IronCurtain refused %s: %s (call %s)", withheld, reason, res.CallID)
	if refs {
		writeRefsError(w, service, msg)
	} else {
		http.Error(w, msg, http.StatusForbidden)
	}
	return true
}

// scanNames finds the secrets in what the push names beside its objects:
// every ref name and push option (gitscan.NameHits). It runs before any
// request to the upstream.
func (p *pushState) scanNames() []secretscan.Hit {
	det := p.h.detector()
	if det == nil {
		return nil
	}
	refs := make([]string, len(p.req.Commands))
	for i, c := range p.req.Commands {
		refs[i] = c.Ref
	}
	hits := gitscan.NameHits(det, "ref name of update", refs)
	return append(hits, gitscan.NameHits(det, "push option", p.req.PushOptions)...)
}

// scanSecrets reads what the push adds (every commit and tag it adds, every
// blob, from the quarantine; objects the upstream has are not read) and the
// objects its refs will point at, new or not (their commit and tag
// messages, through tag chains: gitscan.ScanTips), and returns the secrets
// found with those in its names (p.names), like GitHub's push protection.
// They go into the push's one decision (policy.WirePush.Secrets):
// structural-secret-egress. A push larger than Config.MaxScanBytes gives a
// gitscan.KindIncomplete hit (a human decides on what was not read). An
// error refuses the push.
func (p *pushState) scanSecrets(ctx context.Context) ([]secretscan.Hit, map[string]any, error) {
	det := p.h.detector()
	if det == nil {
		return nil, nil, nil
	}
	hits := append([]secretscan.Hit(nil), p.names...)
	rec := map[string]any{"names": len(p.req.Commands) + len(p.req.PushOptions), "objects": 0, "bytes": 0, "findings": len(hits)}
	var tips []string
	for _, c := range p.req.Commands {
		if !c.IsDelete() {
			tips = append(tips, c.New)
		}
	}
	if len(tips) == 0 {
		return hits, rec, nil
	}
	p.out.progress("IronCurtain: scanning the pushed commits, files and names for secrets")
	start := p.h.now()
	o := p.m.LocalOptions(p.q.path())
	lim := gitscan.Limits{MaxBytes: p.h.cfg.MaxScanBytes} // objects: gitscan.DefaultMaxObjects
	// What the upstream has is not read: the mirror's refs and the
	// upstream's current tips of the updated refs (classify).
	rep, err := gitscan.Scan(ctx, o, det, tips, append([]string{"--all"}, p.olds...), lim)
	if err == nil {
		var tipRep gitscan.Report
		tipRep, err = gitscan.ScanTips(ctx, o, det, tips, lim)
		rep.Merge(tipRep)
	}
	p.h.log.Debug("git HTTP door: push scanned for secrets", "repo", p.rp.url, "took", p.h.now().Sub(start),
		"objects", rep.Objects, "bytes", rep.Bytes, "findings", len(rep.Findings), "incomplete", rep.Incomplete, "err", err)
	if err != nil {
		return nil, nil, err
	}
	rec["objects"], rec["bytes"], rec["findings"] = rep.Objects, rep.Bytes, len(hits)+len(rep.Findings)
	if rep.Incomplete {
		rec["incomplete"] = rep.Reason
	}
	return append(hits, rep.Hits()...), rec, nil
}
