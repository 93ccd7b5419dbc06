package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"ironcurtain.dev/compiler/annotate"
	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/gatewayconfig"
	"ironcurtain.dev/gateway/policy"
)

func runAnnotate(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("annotate-tools", flag.ContinueOnError)
	var (
		mf      modelFlags
		config  = fs.String("servers", "", "gateway.yaml (servers.<name>.command/args/env) or mcp-servers.json ({\"mcpServers\": {name: {command, args, env}}}) (required)")
		out     = fs.String("out", "", "tool-annotations.json to update; other servers' entries are kept (required)")
		batch   = fs.Int("batch-size", 0, "tools per prompt (default 25)")
		only    multiFlag
		refresh = fs.Bool("refresh", false, "annotate again even when a server's tools are unchanged")
	)
	fs.Var(&only, "server", "annotate only this server (repeatable)")
	mf.register(fs, e.getenv)
	if ok, code := parse(fs, e.args, e.stderr); !ok {
		return code
	}
	if *config == "" || *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(e.stderr, "ironcurtain-compile annotate-tools: --servers and --out are required")
		return exitUsage
	}
	gc, err := gatewayconfig.Load(*config)
	if err != nil {
		return fail(e, "annotate-tools", usageErr("--servers: %v", err))
	}
	servers := gc.Servers
	if len(only) > 0 {
		byName := map[string]gatewayconfig.Server{}
		for _, s := range gc.Servers {
			byName[s.Name] = s
		}
		servers = nil
		for _, n := range only {
			s, ok := byName[n]
			if !ok || !s.External() {
				return fail(e, "annotate-tools", usageErr("--server: %s has no external server %q (one with a command)", *config, n))
			}
			servers = append(servers, s)
		}
	}
	var existing *policy.Annotations
	if b, err := artifact.ReadOptional(*out); err != nil {
		return fail(e, "annotate-tools", err)
	} else if b != nil {
		if existing, err = policy.ParseAnnotations(*out, b); err != nil {
			return fail(e, "annotate-tools", usageErr("--out: %v", err))
		}
		if *refresh {
			for _, s := range servers {
				if sa := existing.Servers[s.Name]; sa != nil {
					copy := *sa
					copy.InputHash = ""
					existing.Servers[s.Name] = &copy
				}
			}
		}
	}
	sess, err := mf.open(e, filepath.Dir(*out), newLogger(e.stderr))
	if err != nil {
		return fail(e, "annotate-tools", err)
	}
	list := func(ctx context.Context, s gatewayconfig.Server) ([]annotate.ToolSchema, error) {
		return annotate.ListTools(ctx, s, e.getenv)
	}
	ann, notes, err := annotate.Run(ctx, sess.runner, servers, existing, list, annotate.Options{BatchSize: *batch, Now: e.now})
	if cerr := sess.close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fail(e, "annotate-tools", err)
	}
	// The engine must accept what we write.
	if _, err := policy.New(&policy.CompiledPolicy{Rules: []policy.CompiledRule{}}, ann, nil, policy.Settings{Sandbox: gc.Sandbox}); err != nil {
		return fail(e, "annotate-tools", fmt.Errorf("checking annotations with the engine: %w", err))
	}
	b, err := artifact.Encode(ann)
	if err != nil {
		return fail(e, "annotate-tools", fmt.Errorf("encoding annotations: %w", err))
	}
	if err := artifact.WriteBytes(*out, b); err != nil {
		return fail(e, "annotate-tools", err)
	}
	for _, n := range notes {
		fmt.Fprintf(e.stdout, "%s: %d tools %s\n", n.Server, n.Tools, n.Status)
	}
	fmt.Fprintf(e.stdout, "wrote %s (model: %d calls, %d from cache)\n", *out, sess.runner.Stats().ModelCalls, sess.runner.Stats().CacheHits)
	return exitOK
}
