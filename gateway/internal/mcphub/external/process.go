package external

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// processTransport is the command: mode: each run is a child process
// speaking MCP over its stdin and stdout, with a scrubbed environment and a
// private HOME that lives as long as the transport.
type processTransport struct {
	command string
	args    []string
	dir     string
	env     []string
	home    string
	log     *slog.Logger
}

var _ Transport = (*processTransport)(nil)

// newProcessTransport prepares the child's home directory and environment.
func newProcessTransport(cfg Config, getenv func(string) string, log *slog.Logger) (*processTransport, error) {
	home, err := os.MkdirTemp("", "ironcurtain-ext-"+safeFileName(cfg.Name)+"-")
	if err != nil {
		return nil, fmt.Errorf("creating its home directory: %w", err)
	}
	return &processTransport{command: cfg.Command, args: cfg.Args, dir: cfg.Dir,
		env: childEnv(cfg.Env, getenv("PATH"), home), home: home, log: log}, nil
}

// childEnv is the child's whole environment, sorted.
func childEnv(extra map[string]string, path, home string) []string {
	if path == "" {
		path = DefaultPath
	}
	m := map[string]string{"PATH": path, "HOME": home, "LANG": "C.UTF-8"}
	for k, v := range extra {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// Open implements Transport: it starts a process.
func (t *processTransport) Open(context.Context) (*Conn, error) {
	cmd := exec.Command(t.command, t.args...)
	cmd.Env = t.env
	cmd.Dir = t.dir
	if cmd.Dir == "" {
		cmd.Dir = t.home
	}
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	// stderr is an os.Pipe, not StderrPipe: Wait must not depend on a
	// grandchild that keeps stderr open.
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	cmd.Stderr = stderrW
	err = cmd.Start()
	_ = stderrW.Close()
	if err != nil {
		_ = stderrR.Close()
		return nil, fmt.Errorf("running %s: %w", filepath.Base(t.command), err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		defer stderrR.Close()
		logStderr(t.log, stderrR)
	}()
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	return &Conn{
		MCP:  transport.NewIO(stdout, stdin, nil),
		Done: exited,
		Err:  func() error { return fmt.Errorf("the process exited (%v)", exitErr) },
		Stop: func() {
			// Close stdin, wait a little, then kill the group.
			_ = stdin.Close()
			select {
			case <-exited:
				return
			case <-time.After(stopGrace):
			}
			killProcessGroup(cmd)
			<-exited
		},
	}, nil
}

// Close implements Transport: it removes the private HOME.
func (t *processTransport) Close() error {
	if err := os.RemoveAll(t.home); err != nil {
		return fmt.Errorf("removing its home: %w", err)
	}
	return nil
}

// logStderr logs the child's stderr line by line.
func logStderr(log *slog.Logger, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxStderrLine)
	for {
		for sc.Scan() {
			log.Info("external server stderr", "line", sc.Text())
		}
		if !errors.Is(sc.Err(), bufio.ErrTooLong) {
			return
		}
		log.Info("external server stderr", "line", "[line longer than 4096 bytes dropped]")
		// Skip the rest of the long line, then carry on.
		br := bufio.NewReader(r)
		if _, err := br.ReadString('\n'); err != nil {
			return
		}
		sc = bufio.NewScanner(br)
		sc.Buffer(make([]byte, 0, 4096), maxStderrLine)
	}
}
