package git

import (
	"context"
	"errors"
	"fmt"
	"time"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// Egress rows of the git tool server (audit.EgressEvent Kind and Rule).
const (
	egressKind = "git"
	egressRule = "git-policy"
)

// networkOp runs one git network operation (fetch, push, ls-remote) against
// u and records its egress row, linked to the call being served
// (servers.NewEgressEvent), before it returns: every git transfer that
// leaves is a row linked to the decision that let it. Local remotes
// (UnsafeAllowLocalRemotes) reach no network and write no row. Without a
// sink the operation is refused before anything is sent; a failed write
// fails the call. git runs as a child process, so the row has the remote's
// host, port, duration and outcome but no byte counts.
func (s *Server) networkOp(ctx context.Context, op string, u remoteURL, run func() error) error {
	if u.local {
		return run()
	}
	if s.sink == nil {
		return refuse("network operation refused: the gateway has no audit sink to record it")
	}
	r, err := policy.ParseGitRemoteURL(u.url)
	if err != nil {
		return &toolError{msg: "network operation refused: the remote is not a URL the gateway can record", err: err}
	}
	port := r.Port
	if port == 0 {
		port = 443
		if r.Scheme == "ssh" {
			port = 22
		}
	}
	ev := servers.NewEgressEvent(ctx, servers.Egress{Kind: egressKind, Method: op, Host: r.Host.String(), Port: port})
	ev.Decision, ev.Rule, ev.Reason = "allow", egressRule, "the remote the call's policy decision approved"
	runErr := run()
	ev.Duration = time.Since(ev.Time)
	if runErr != nil {
		ev.Error = "git " + op + " failed"
		var ge *gitexec.Error
		if errors.As(runErr, &ge) {
			ev.Error = fmt.Sprintf("git %s failed (exit %d)", op, ge.ExitCode)
		}
	}
	if err := s.sink.Record(context.WithoutCancel(ctx), ev); err != nil {
		return &toolError{msg: "the gateway could not record the network operation", err: errors.Join(fmt.Errorf("recording git egress: %w", err), runErr)}
	}
	return runErr
}
