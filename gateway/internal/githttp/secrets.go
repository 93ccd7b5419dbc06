package githttp

import (
	"context"

	"ironcurtain.dev/gateway/internal/gitscan"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// SecretSource gives the secret scanner in force (*policy.Engine).
type SecretSource interface {
	SecretScanner() *policy.SecretScanner
}

var _ SecretSource = (*policy.Engine)(nil)

// scanSecrets reads what the push adds (every commit and tag it adds, every
// blob, from the quarantine; objects the upstream has are not read) and
// returns the secrets found, like GitHub's push protection. They go into the
// push's one decision (policy.WirePush.Secrets): structural-secret-egress.
// A push larger than Config.MaxScanBytes gives a gitscan.KindIncomplete hit
// (a human decides on what was not read). An error refuses the push.
func (p *pushState) scanSecrets(ctx context.Context) ([]secretscan.Hit, map[string]any, error) {
	if p.h.d.Secrets == nil || p.q == nil {
		return nil, nil, nil
	}
	det := p.h.d.Secrets.SecretScanner().Detector()
	if det == nil {
		return nil, nil, nil
	}
	var tips []string
	for _, c := range p.req.Commands {
		if !c.IsDelete() {
			tips = append(tips, c.New)
		}
	}
	p.out.progress("IronCurtain: scanning the pushed commits and files for secrets")
	start := p.h.now()
	rep, err := gitscan.Scan(ctx, p.m.LocalOptions(p.q.path()), det, tips, []string{"--all"},
		gitscan.Limits{MaxBytes: p.h.cfg.MaxScanBytes}) // objects: gitscan.DefaultMaxObjects
	p.h.log.Debug("git HTTP door: push scanned for secrets", "repo", p.rp.url, "took", p.h.now().Sub(start),
		"objects", rep.Objects, "bytes", rep.Bytes, "findings", len(rep.Findings), "incomplete", rep.Incomplete, "err", err)
	if err != nil {
		return nil, nil, err
	}
	rec := map[string]any{"objects": rep.Objects, "bytes": rep.Bytes, "findings": len(rep.Findings)}
	if rep.Incomplete {
		rec["incomplete"] = rep.Reason
	}
	return rep.Hits(), rec, nil
}
