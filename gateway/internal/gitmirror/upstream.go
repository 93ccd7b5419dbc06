package gitmirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
)

// UpstreamMirror is the gateway-private bare mirror of one upstream
// repository, for the git smart HTTP door (internal/doors/githttp): the door
// serves clones and fetches from it, indexes pushed packs into quarantines
// of it, and pushes upstream from it. Its refs/heads and refs/tags are the
// upstream's as of the last Refresh. Credentials reach git only here,
// through the mirrors' credential helper.
type UpstreamMirror struct {
	s    *Mirrors
	path string
	url  string // the upstream URL git talks to
}

// UpstreamMirror returns (creating it if needed) the mirror of url, an
// https URL the caller has checked against policy.
func (s *Mirrors) UpstreamMirror(ctx context.Context, url string) (*UpstreamMirror, error) {
	if !strings.HasPrefix(url, "https://") && !(s.unsafeLocal && strings.HasPrefix(url, "/")) {
		return nil, fmt.Errorf("mirroring %q: only https upstreams are served", url)
	}
	sum := sha256.Sum256([]byte("door\x00" + url))
	path := filepath.Join(s.dir, "door-"+hex.EncodeToString(sum[:16])+".git")
	unlock := s.Lock(path)
	defer unlock()
	if err := s.Ensure(ctx, path); err != nil {
		return nil, err
	}
	return &UpstreamMirror{s: s, path: path, url: url}, nil
}

// Dir is the mirror's git directory.
func (m *UpstreamMirror) Dir() string { return m.path }

// Refresh fetches the upstream's branches and tags into the mirror's
// refs/heads and refs/tags (pruning those gone upstream) with the
// gateway's credentials.
func (m *UpstreamMirror) Refresh(ctx context.Context) error {
	unlock := m.s.Lock(m.path)
	defer unlock()
	o := m.s.Options(m.path)
	if m.s.unsafeLocal && strings.HasPrefix(m.url, "/") {
		o = LocalTransfer(o, m.url)
	}
	_, err := gitexec.Run(ctx, o, "fetch", "--prune", "--prune-tags", "--no-write-fetch-head", "--no-recurse-submodules",
		"--no-tags", "--quiet", "--", m.url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
	if err != nil {
		return fmt.Errorf("fetching %s into the mirror: %s", m.s.Redact(m.url), m.s.Redact(err.Error()))
	}
	return nil
}

// LocalOptions runs a local git command in the mirror (no credentials, no
// network), in quarantine when it is not "" (gitexec.Options.Quarantine).
func (m *UpstreamMirror) LocalOptions(quarantine string) gitexec.Options {
	o := m.s.Options(m.path)
	var cfg []string
	for _, kv := range o.Config {
		if !strings.HasPrefix(kv, "credential.helper=") {
			cfg = append(cfg, kv)
		}
	}
	o.Config = cfg
	o.Timeout = m.s.timeout
	o.Quarantine = quarantine
	return o
}

// Push pushes refspecs ("<object id>:<full ref>", never forced) upstream
// from the mirror with the gateway's credentials and returns git's
// porcelain report. quarantine, when not "", holds the pushed objects
// (gitexec.Options.Quarantine).
func (m *UpstreamMirror) Push(ctx context.Context, refspecs []string, atomic bool, quarantine string) (string, error) {
	args := []string{"push", "--porcelain", "--no-verify", "--recurse-submodules=no"}
	if atomic {
		args = append(args, "--atomic")
	}
	args = append(args, "--", m.url)
	for _, sp := range refspecs {
		if strings.HasPrefix(sp, "+") || strings.HasPrefix(sp, ":") || strings.HasPrefix(sp, "-") {
			return "", fmt.Errorf("pushing from the mirror: refspec %q is not a plain update", sp)
		}
	}
	args = append(args, refspecs...)
	o := m.s.Options(m.path)
	if m.s.unsafeLocal && strings.HasPrefix(m.url, "/") {
		o = LocalTransfer(o, m.url)
	}
	o.Quarantine = quarantine
	res, err := gitexec.Run(ctx, o, args...)
	report := m.s.Redact(gitexec.CleanText(string(res.Stdout)))
	if err != nil {
		return report, fmt.Errorf("pushing to %s: %s", m.s.Redact(m.url), m.s.Redact(err.Error()))
	}
	return report, nil
}
