package gitmirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/gitwire"
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

// ErrNoListing is returned by ListForPush for an upstream it cannot list
// with one request (a local test upstream): the caller refreshes instead.
var ErrNoListing = errors.New("the upstream's refs cannot be listed for a push with one request")

// ListForPush returns the upstream's receive-pack ref listing with one GET
// of info/refs?service=git-receive-pack, made by git's own HTTP transport
// (git remote-https, "list for-push") with the gateway's credentials
// through the helper, and read strictly (gitwire.ReadHelperRefs). The
// mirror is not touched.
func (m *UpstreamMirror) ListForPush(ctx context.Context, maxRefs int) ([]gitwire.AdvertisedRef, error) {
	if !strings.HasPrefix(m.url, "https://") {
		return nil, ErrNoListing
	}
	o := m.s.Options(m.path)
	o.Stdin = strings.NewReader("list for-push\n\n")
	res, err := gitexec.Run(ctx, o, "remote-https", m.url, m.url)
	if err != nil {
		return nil, fmt.Errorf("listing %s for a push: %s", m.s.Redact(m.url), m.s.Redact(err.Error()))
	}
	refs, err := gitwire.ReadHelperRefs(bytes.NewReader(res.Stdout), "sha1", maxRefs)
	if err != nil {
		return nil, fmt.Errorf("listing %s for a push: %w", m.s.Redact(m.url), err)
	}
	return refs, nil
}

// Missing returns the ids among ids that the mirror lacks (one git
// cat-file --batch-check).
func (m *UpstreamMirror) Missing(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	o := m.LocalOptions("")
	o.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	res, err := gitexec.Run(ctx, o, "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, fmt.Errorf("checking the mirror's objects: %w", err)
	}
	var missing []string
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if id, ok := strings.CutSuffix(l, " missing"); ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}
