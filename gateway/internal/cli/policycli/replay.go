package policycli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/replay"
	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/policy"
)

// Exit codes of replay (besides exitOK and exitUsage).
const (
	exitLooser      = 1 // some recorded call would be decided more loosely
	exitReplayError = 3 // the candidate did not load, or the records could not be read
)

// Defaults of replay.
const (
	defaultReplayConfig = "/etc/ironcurtain/gateway.yaml"
	defaultReplaySince  = "24h"
	envDatabaseURL      = "IRONCURTAIN_DATABASE_URL"
)

const replayUsage = `usage: ironcurtain policy replay --candidate DIR [--config gateway.yaml] [--since 24h|T] [--until T]
                                 [--session S] [--server X] [--format table|json] [--database-url URL]

Re-evaluates the calls recorded in Postgres under the candidate policy
directory, with the settings of gateway.yaml (the ones the gateway ran
under), on the canonical arguments that were recorded: no file system or
repository state is read. Prints the calls whose decision would change,
per (old rule -> new rule, old decision -> new decision), looser first.
Calls whose stored arguments were cut or redacted, that depended on a
repository, a hard link or the gateway's own checks are counted apart.
Exit status: 0 nothing looser, 1 some call would be decided more loosely,
2 bad usage, 3 the candidate or the records could not be read.
The database URL comes from --database-url or IRONCURTAIN_DATABASE_URL.
`

type replayFlags struct {
	candidate, configPath, since, until, session, server, format, dsn string
}

func runReplay(ctx context.Context, args []string, env Env) int {
	var f replayFlags
	fs := newFlags("replay", env)
	fs.StringVar(&f.candidate, "candidate", "", "candidate policy directory (compiled-policy.json, dynamic-lists.json, tool-annotations.json)")
	fs.StringVar(&f.configPath, "config", defaultReplayConfig, "gateway.yaml the gateway ran with")
	fs.StringVar(&f.since, "since", defaultReplaySince, "replay calls recorded since this RFC 3339 time or this long ago")
	fs.StringVar(&f.until, "until", "", "replay calls recorded before this RFC 3339 time (or this long ago)")
	fs.StringVar(&f.session, "session", "", "only this session")
	fs.StringVar(&f.server, "server", "", "only this tool server")
	fs.StringVar(&f.format, "format", "table", "table or json")
	fs.StringVar(&f.dsn, "database-url", "", "Postgres URL (default $"+envDatabaseURL+")")
	fs.Usage = func() { fmt.Fprint(env.Stderr, replayUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	filter, err := f.validate(fs.NArg(), time.Now())
	if err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy replay: %v\n", err)
		return exitUsage
	}
	eng, err := loadCandidate(expandHome(f.candidate, env), expandHome(f.configPath, env))
	if err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy replay: %v\n", err)
		return exitReplayError
	}
	if f.dsn == "" {
		f.dsn = env.Getenv(envDatabaseURL)
	}
	pool, err := store.Open(ctx, f.dsn)
	if err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy replay: %v\n", err)
		return exitReplayError
	}
	defer pool.Close()
	rep, err := replay.New(eng, f.candidate).Run(ctx, replay.PG{Pool: pool}, filter)
	if err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy replay: %v\n", err)
		return exitReplayError
	}
	if f.format == "json" {
		err = rep.WriteJSON(env.Stdout)
	} else {
		err = rep.WriteTable(env.Stdout)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy replay: writing: %v\n", err)
		return exitReplayError
	}
	if rep.Looser() {
		return exitLooser
	}
	return exitOK
}

func (f *replayFlags) validate(nargs int, now time.Time) (replay.Filter, error) {
	var filter replay.Filter
	if nargs > 0 {
		return filter, errors.New("unexpected arguments")
	}
	if f.candidate == "" {
		return filter, errors.New("--candidate DIR is required")
	}
	if f.format != "table" && f.format != "json" {
		return filter, fmt.Errorf("--format %q: want table or json", f.format)
	}
	var err error
	if filter.Since, err = opsapi.ParseSince(f.since, now); err != nil {
		return filter, fmt.Errorf("--since: %w", err)
	}
	if filter.Until, err = opsapi.ParseSince(f.until, now); err != nil {
		return filter, fmt.Errorf("--until: %w", err)
	}
	if !filter.Since.IsZero() && !filter.Until.IsZero() && !filter.Until.After(filter.Since) {
		return filter, errors.New("--until must be after --since")
	}
	filter.Session, filter.Server = f.session, f.server
	return filter, nil
}

// loadCandidate loads dir as the gateway configured by configPath would
// have: its settings, with the gateway's own policy directories still
// protected (a call the gateway refused for touching its policy must not
// turn into an allowed one because the candidate lives elsewhere), and no
// shadow policy. The engine sees no file system (policy.LoadDirRecorded).
func loadCandidate(dir, configPath string) (*policy.Engine, error) {
	cfg, err := config.Load(configPath)
	if err != nil {
		return nil, err
	}
	// Home stays unset, as in the gateway: ~ expands from $HOME.
	s := ReplaySettings(cfg)
	eng, err := policy.LoadDirRecorded(dir, s, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		return nil, fmt.Errorf("loading the candidate: %w", err)
	}
	return eng, nil
}

// ReplaySettings are the policy settings the gateway configured by cfg
// decided with, for a candidate policy loaded from another directory.
func ReplaySettings(cfg *config.Config) policy.Settings {
	s := cfg.PolicySettings()
	s.ShadowPolicyDir = ""
	for _, p := range []string{cfg.PolicyDir, cfg.ShadowPolicyDir, cfg.AnnotationsFile} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			s.ProtectedPaths = append(s.ProtectedPaths, abs)
		}
	}
	return s
}
