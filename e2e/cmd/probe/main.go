// Command ic-e2e-probe is the end-to-end suite's probe inside the agent
// container. The suite copies it into a container made from the real agent
// image and runs it (docker exec) to look at the container from the inside:
// what it can dial, what the gateway's egress proxy answers, what its
// environment holds. It also plants files on the shared workspace the way a
// compromised agent container could (bypassing the gateway), so that the
// suite can show the gateway never runs them.
//
//	ic-e2e-probe idle                       block until SIGTERM (the container's main process)
//	ic-e2e-probe dial ADDR...               try TCP connections; JSON result per address
//	ic-e2e-probe fetch [-ca F] [-proxy U] URL  GET through $HTTPS_PROXY / $HTTP_PROXY (or U), CONNECT by hand
//	ic-e2e-probe env                        JSON: this process's and PID 1's environment
//	ic-e2e-probe plant -mode 0755 PATH      write stdin to PATH (parents created)
//	ic-e2e-probe mkdir PATH...              create directories (and parents)
//	ic-e2e-probe exists PATH...             JSON: which paths exist (lstat)
//	ic-e2e-probe mcp < PLAN                 MCP tool calls over several gateway endpoints (mcp.go); JSON timings
//
// Output is JSON on stdout; the exit code is 0 unless the probe itself failed.
// It is a test fixture: it never ships in an image.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: ic-e2e-probe idle|dial|fetch|env|plant|mkdir|exists|mcp|launcher ...")
		return 2
	}
	var (
		out any
		err error
	)
	switch args[0] {
	case "idle":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		<-ctx.Done()
		return 0
	case "dial":
		out = dialAll(args[1:], 3*time.Second)
	case "fetch":
		out, err = fetchCmd(args[1:], os.Getenv)
	case "env":
		out, err = environment()
	case "plant":
		err = plant(args[1:], stdin)
		out = map[string]bool{"ok": err == nil}
	case "mkdir":
		for _, p := range args[1:] {
			if err = os.MkdirAll(p, 0o755); err != nil {
				break
			}
		}
		out = map[string]bool{"ok": err == nil}
	case "exists":
		out = exists(args[1:])
	case "mcp":
		out, err = mcpCmd(stdin, os.Getenv)
	case "launcher":
		if len(args) != 2 {
			err = errors.New("usage: launcher SOCKET (request lines on stdin)")
			break
		}
		out, err = launcherCmd(args[1], stdin)
	default:
		err = fmt.Errorf("unknown command %q", args[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "ic-e2e-probe %s: %v\n", args[0], err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(out); err != nil {
		fmt.Fprintf(stderr, "ic-e2e-probe: %v\n", err)
		return 1
	}
	return 0
}

// environ is what `env` reports.
type environ struct {
	Self []string `json:"self"`
	Init []string `json:"init"`
}

func environment() (environ, error) {
	e := environ{Self: os.Environ()}
	b, err := os.ReadFile("/proc/1/environ")
	if err != nil {
		return e, fmt.Errorf("reading /proc/1/environ: %w", err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if kv != "" {
			e.Init = append(e.Init, kv)
		}
	}
	return e, nil
}

func plant(args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("plant", flag.ContinueOnError)
	mode := fs.String("mode", "0644", "file mode (octal)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want exactly one path")
	}
	m, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil {
		return fmt.Errorf("-mode: %w", err)
	}
	path := fs.Arg(0)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, os.FileMode(m)); err != nil {
		return err
	}
	return os.Chmod(path, os.FileMode(m))
}

func exists(paths []string) map[string]bool {
	out := make(map[string]bool, len(paths))
	for _, p := range paths {
		_, err := os.Lstat(p)
		out[p] = err == nil
	}
	return out
}
