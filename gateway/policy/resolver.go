package policy

import (
	"context"
	"errors"
	"fmt"
)

// ErrRemote is wrapped by every remote resolution failure.
var ErrRemote = errors.New("cannot resolve git remote")

// RemoteResolution is what a repository says about one remote.
type RemoteResolution struct {
	// Remote is the remote's name ("" when the caller gave a URL).
	Remote string
	// URLs are the push URLs (for a push) or fetch URLs, parsed; every one
	// must pass policy.
	URLs []GitRemote
	// PushRefspecs are the remote's configured remote.<name>.push values.
	PushRefspecs []string
	// Mirror is remote.<name>.mirror.
	Mirror bool
	// Branch is the current branch's short name ("" when HEAD is detached).
	Branch string
}

// RemoteResolver reads what a repository inside the sandbox says about its
// remotes. The engine asks it for named and default remotes of git calls
// and pushes; the implementation (gateway/gitremote) reads the repository
// and may run git, which is why it is passed in (WithRemoteResolver) rather
// than built here. Every failure must wrap ErrRemote.
type RemoteResolver interface {
	// Resolve resolves name (a remote name, or "" for the default the way
	// git picks it) in the repository containing repoDir: the push URLs
	// when push is set (pushurl and pushInsteadOf included), else the fetch
	// URLs. repoDir and sandbox are canonical; the repository must lie
	// inside sandbox.
	Resolve(ctx context.Context, repoDir, sandbox, name string, push bool) (RemoteResolution, error)
	// Inspect checks the repository containing repoDir (inside sandbox, no
	// executable config, a safe git directory) and reads its current
	// branch, without resolving any remote: for a push to an explicit URL.
	Inspect(ctx context.Context, repoDir, sandbox string) (RemoteResolution, error)
}

// noResolver is the resolver of an engine built without one: every
// resolution fails, so a call that depends on a repository's remotes is
// denied rather than judged without them.
type noResolver struct{}

var errNoResolver = fmt.Errorf("%w: no git remote resolver is configured", ErrRemote)

func (noResolver) Resolve(context.Context, string, string, string, bool) (RemoteResolution, error) {
	return RemoteResolution{}, errNoResolver
}

func (noResolver) Inspect(context.Context, string, string) (RemoteResolution, error) {
	return RemoteResolution{}, errNoResolver
}
