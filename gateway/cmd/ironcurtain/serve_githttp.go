package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/githttp"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/git"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// gitDoor builds the git smart HTTP door (/git/ on the agent port) over the
// hub's pipeline and the git server's mirrors; nil when git.http.disabled is
// set or no git server is built.
func gitDoor(cfg *config.Config, eng *policy.Engine, g *gate.Gate, srvs []servers.Server, auth session.Authenticator, sink audit.Sink, log *slog.Logger) (http.Handler, error) {
	if cfg.Git.HTTP.Disabled {
		return nil, nil
	}
	var gsrv *git.Server
	for _, s := range srvs {
		if g, ok := s.(*git.Server); ok {
			gsrv = g
		}
	}
	if gsrv == nil {
		return nil, nil
	}
	door, err := githttp.New(githttp.Config{
		MaxPackBytes: cfg.Git.HTTP.MaxPackBytes,
		MaxObjects:   cfg.Git.HTTP.MaxObjects,
		MaxRefs:      cfg.Git.HTTP.MaxRefs,
		Timeout:      cfg.Git.HTTP.Timeout,
		MaxScanBytes: cfg.Secrets.PushLimit(),
	}, githttp.Deps{Gate: g, Auth: auth, Mirrors: gsrv.Mirrors(), Allow: eng, Audit: sink, Secrets: eng, Logger: log.With("component", "githttp")})
	if err != nil {
		return nil, fmt.Errorf("building the git HTTP door: %w", err)
	}
	return door, nil
}

// gitDoorPrefix is where the door is mounted on the agent port.
const gitDoorPrefix = githttp.Prefix
