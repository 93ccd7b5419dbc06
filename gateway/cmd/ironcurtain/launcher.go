package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"ironcurtain.dev/gateway/internal/launcher"
)

func init() {
	commands["launcher"] = command{summary: "run the container launcher for image: servers (holds the Docker socket)", run: runLauncher}
}

func runLauncher(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("launcher", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfgPath := fs.String("config", "/etc/ironcurtain/launcher.yaml", "path of launcher.yaml")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, nil))
	if err := launcher.Run(ctx, *cfgPath, log); err != nil {
		log.Error("launcher stopped", "err", err)
		fmt.Fprintf(e.stderr, "ironcurtain launcher: %v\n", err)
		return 1
	}
	return 0
}
