// Package opscli implements the operator subcommands of the ironcurtain
// binary: `migrate` and `audit` (straight to Postgres, for the migrate
// one-shot service and for auditors) and `escalations` (through the ops
// API, with the operator token). Output is a readable table, or JSON with
// --json. Exit codes: 0 success, 1 the operation failed (or verify found a
// broken chain), 2 bad usage.
package opscli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

// Environment variables read by the commands.
const (
	EnvDatabaseURL   = "IRONCURTAIN_DATABASE_URL"
	EnvOpsURL        = "IRONCURTAIN_OPS_URL"
	EnvOperatorToken = "IRONCURTAIN_OPERATOR_TOKEN"
)

// DefaultOpsURL is where the ops API listens in the compose topology.
const DefaultOpsURL = "http://127.0.0.1:8081"

// Env is what a command may use from its process.
type Env struct {
	Getenv func(string) string
	Stdout io.Writer
	Stderr io.Writer
}

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// errUsage marks an error that is the user's: printed with usage, exit 2.
var errUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// finish prints err and returns the exit code.
func finish(e Env, cmd string, err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.Stderr, "ironcurtain %s: %s\n", cmd, strings.TrimPrefix(err.Error(), "usage: "))
		return exitUsage
	default:
		fmt.Fprintf(e.Stderr, "ironcurtain %s: %v\n", cmd, err)
		return exitFailed
	}
}

// parse parses flags anywhere among the arguments ("approve ID --reason x"
// as well as "approve --reason x ID") and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErr("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name string, e Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	return fs
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// readSecretFile reads a token from a file (trailing newline trimmed).
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// oneLine shortens text for a table cell.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

// ctxErr turns a cancelled context into a clean exit for follow modes.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// opsClient is the ops API client of the escalations, sessions and policy
// reload commands: the URL from --ops-url, else $IRONCURTAIN_OPS_URL, else
// the default; the operator token from --operator-token-file, else the
// environment. A bad URL is bad usage.
func opsClient(e Env, opsURL, tokenFile string) (*opsapi.Client, error) {
	if opsURL == "" {
		opsURL = e.Getenv(EnvOpsURL)
	}
	if opsURL == "" {
		opsURL = DefaultOpsURL
	}
	token := e.Getenv(EnvOperatorToken)
	if tokenFile != "" {
		var err error
		if token, err = readSecretFile(tokenFile); err != nil {
			return nil, err
		}
	}
	client, err := opsapi.NewClient(opsURL, opsapi.OperatorToken(token))
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return client, nil
}
