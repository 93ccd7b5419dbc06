package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"ironcurtain.dev/gateway/internal/launcher"
)

func runLauncher(ctx context.Context, e Env) int {
	fs := flag.NewFlagSet("launcher", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	cfgPath := fs.String("config", "/etc/ironcurtain/launcher.yaml", "path of launcher.yaml")
	if err := fs.Parse(e.Args); err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(e.Stderr, nil))
	if err := launcher.Run(ctx, *cfgPath, log); err != nil {
		log.Error("launcher stopped", "err", err)
		fmt.Fprintf(e.Stderr, "ironcurtain launcher: %v\n", err)
		return 1
	}
	return 0
}
