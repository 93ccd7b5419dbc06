// Package runcmd implements `ironcurtain run`: on the workstation it mints
// a session through the ops API, starts the agent's container through the
// Docker Engine API on the stack's agent network with that session's token
// (and nothing else), streams its output, shows the session's escalations as
// they arrive and takes the operator's answer in place, and on the end of the
// run (completion, Ctrl-C, budget, TTL, an error) removes the container,
// revokes the session and prints a summary.
//
// Docker, the ops API and the audit check are small interfaces (Docker, Ops,
// Verifier) so the whole flow is tested with fakes; Engine is the Docker
// Engine API implementation.
package runcmd

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Environment variables read by the command.
const (
	EnvOpsURL        = "IRONCURTAIN_OPS_URL"
	EnvOperatorToken = "IRONCURTAIN_OPERATOR_TOKEN"
	// EnvWorkspacesDir is the host directory holding the gateway's
	// session_workspaces.root (compose bind-mounts it): the run mounts its
	// session's subdirectory as /workspace.
	EnvWorkspacesDir = "IRONCURTAIN_WORKSPACES_DIR"
	EnvAgentImage    = "IC_AGENT_IMAGE"
	EnvShellImage    = "IC_AGENT_SHELL_IMAGE"
	EnvModel         = "IRONCURTAIN_MODEL"
)

// Defaults of the compose topology.
const (
	DefaultOpsURL     = "http://127.0.0.1:8081"
	DefaultNetwork    = "ironcurtain_agent_net"
	DefaultAgentImage = "ironcurtain/agent:dev"
	DefaultShellImage = "ironcurtain/agent-shell:dev"
	DefaultModel      = "replay:/usr/share/ironcurtain/transcripts/demo.yaml"
	DefaultGateway    = "http://gateway:8080"
	DefaultTTL        = time.Hour
	// MinTTL and MaxTTL are the gateway's bounds on a minted session.
	MinTTL = time.Minute
	MaxTTL = 30 * 24 * time.Hour
	// MaxCostUSD bounds --max-cost-usd (a typo guard, not a policy).
	MaxCostUSD = 10000
)

// Options is one `ironcurtain run` invocation.
type Options struct {
	Agent        string // runner, shell or an image
	Image        string // resolved from Agent
	Model        string
	TTL          time.Duration
	MaxCostUSD   float64
	MaxToolCalls int64
	Labels       map[string]string
	Task         string
	Interactive  bool
	Detach       bool
	// AttachID is set for `run attach ID`.
	AttachID      string
	OpsURL        string
	OperatorToken string
	Network       string
	WorkspacesDir string
	GatewayURL    string
	Proxy         string
	// Grace is how long a first Ctrl-C waits for the agent to stop.
	Grace time.Duration
	// Poll is the session poll interval, and the escalation poll interval
	// while the escalation event stream is down.
	Poll time.Duration
	// Reconnect is how long a run waits to open the escalation event
	// stream again after it ended or failed.
	Reconnect time.Duration
}

// ErrUsage marks an error that is the user's (exit code 2).
var ErrUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Usage is the command's help text.
const Usage = `usage: ironcurtain run [--agent runner|shell|IMAGE] [--model M] [--ttl D] [--max-cost-usd X] [--max-tool-calls N]
                       [--label k=v ...] [--interactive | --detach] "task"
       ironcurtain run attach SESSION_ID
  Mints a session, runs the agent container on the stack's agent network with that session's
  token, shows its output and escalations (answer: a = approve, s = approve similar,
  d REASON = deny), and on the end removes the container, revokes the session and prints a summary.
  Ctrl-C stops the agent (a second Ctrl-C forces). The operator token comes from
  IRONCURTAIN_OPERATOR_TOKEN or compose/.env; the ops API from --ops-url or IRONCURTAIN_OPS_URL.`

type labelFlag map[string]string

func (l labelFlag) String() string { return "" }

func (l labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	if _, dup := l[k]; dup {
		return fmt.Errorf("label %q given twice", k)
	}
	l[k] = val
	return nil
}

// Parse reads the arguments of `ironcurtain run` (flags anywhere) and the
// environment. Every error names the flag or variable at fault.
func Parse(args []string, getenv func(string) string, stderr io.Writer) (Options, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := Options{Labels: map[string]string{}, Grace: 10 * time.Second, Poll: 500 * time.Millisecond, Reconnect: 3 * time.Second}
	fs.StringVar(&o.Agent, "agent", "runner", "runner, shell or an image name")
	fs.StringVar(&o.Model, "model", "", "the runner's model (default $"+EnvModel+" or the offline demo transcript)")
	ttl := fs.String("ttl", "", "the session's lifetime (default 1h; 1m to 720h)")
	fs.Float64Var(&o.MaxCostUSD, "max-cost-usd", 0, "model cost budget in US dollars (0: the gateway's default)")
	fs.Int64Var(&o.MaxToolCalls, "max-tool-calls", 0, "tool-call budget (0: no limit)")
	fs.Var(labelFlag(o.Labels), "label", "key=value on the session (repeatable)")
	fs.BoolVar(&o.Interactive, "interactive", false, "keep the run open for follow-up turns (the runner's chat)")
	fs.BoolVar(&o.Detach, "detach", false, "print the session id and leave the run going (reattach with `run attach ID`)")
	fs.StringVar(&o.OpsURL, "ops-url", "", "ops API URL (default $"+EnvOpsURL+" or "+DefaultOpsURL+")")
	fs.StringVar(&o.Network, "network", DefaultNetwork, "the stack's agent network")
	fs.StringVar(&o.GatewayURL, "gateway", DefaultGateway, "the gateway as the agent network names it (its proxy is the same host, port 3128)")
	fs.StringVar(&o.WorkspacesDir, "workspaces-dir", "", "host directory of the gateway's session workspaces (default $"+EnvWorkspacesDir+")")
	fs.Usage = func() { fmt.Fprintln(stderr, Usage); fs.PrintDefaults() }
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return o, err
			}
			return o, usageErr("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) > 0 && pos[0] == "attach" {
		if len(pos) != 2 {
			return o, usageErr("attach needs exactly one session id")
		}
		o.AttachID = pos[1]
		if !validSessionID(o.AttachID) {
			return o, usageErr("attach: %q is not a session id (sess_…)", o.AttachID)
		}
	} else {
		if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
			if !(o.Interactive && len(pos) == 0) {
				return o, usageErr("want exactly one task (quote it), got %d arguments", len(pos))
			}
		} else {
			o.Task = pos[0]
		}
	}
	if o.Interactive && o.Detach {
		return o, usageErr("--interactive and --detach exclude each other")
	}
	o.TTL = DefaultTTL
	if *ttl != "" {
		d, err := time.ParseDuration(*ttl)
		if err != nil {
			return o, usageErr("--ttl: want a duration such as 30m or 2h")
		}
		o.TTL = d
	}
	if o.TTL < MinTTL || o.TTL > MaxTTL {
		return o, usageErr("--ttl: %s is out of range (1m to 720h)", o.TTL)
	}
	if o.MaxCostUSD < 0 || o.MaxCostUSD > MaxCostUSD || o.MaxCostUSD != o.MaxCostUSD {
		return o, usageErr("--max-cost-usd: want 0 to %d", MaxCostUSD)
	}
	if o.MaxToolCalls < 0 {
		return o, usageErr("--max-tool-calls: must not be negative")
	}
	switch o.Agent {
	case "runner":
		o.Image = or(getenv(EnvAgentImage), DefaultAgentImage)
	case "shell":
		o.Image = or(getenv(EnvShellImage), DefaultShellImage)
		if o.Interactive {
			return o, usageErr("--interactive: only for --agent runner (the shell runs one command)")
		}
	case "":
		return o, usageErr("--agent: want runner, shell or an image name")
	default:
		if strings.ContainsAny(o.Agent, " \t\n") || strings.HasPrefix(o.Agent, "-") {
			return o, usageErr("--agent: %q is not an image name", o.Agent)
		}
		o.Image = o.Agent
	}
	if o.Model == "" {
		o.Model = or(getenv(EnvModel), DefaultModel)
	}
	o.OpsURL = or(o.OpsURL, getenv(EnvOpsURL), DefaultOpsURL)
	o.OperatorToken = getenv(EnvOperatorToken)
	if o.OperatorToken == "" {
		return o, usageErr("%s: missing (set it, or run from the repository so compose/secrets/operator-token is read; make up creates it)", EnvOperatorToken)
	}
	o.WorkspacesDir = or(o.WorkspacesDir, getenv(EnvWorkspacesDir))
	if o.WorkspacesDir != "" && !filepath.IsAbs(o.WorkspacesDir) {
		abs, err := filepath.Abs(o.WorkspacesDir)
		if err != nil {
			return o, usageErr("--workspaces-dir: %v", err)
		}
		o.WorkspacesDir = abs
	}
	u, err := url.Parse(o.GatewayURL)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.Path != "" || u.User != nil || u.RawQuery != "" {
		return o, usageErr("--gateway: want http://HOST:PORT (the gateway on the agent network)")
	}
	o.Proxy = net.JoinHostPort(u.Hostname(), "3128")
	return o, nil
}

func or(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func validSessionID(s string) bool {
	if !strings.HasPrefix(s, "sess_") || len(s) > 64 {
		return false
	}
	for _, r := range s[5:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return len(s) > 5
}

// DotEnv returns a getenv that falls back to KEY=VALUE lines of path (the
// stack's compose/.env) for the variables the process does not set. A
// missing file is no error; an unreadable one is.
func DotEnv(path string, getenv func(string) string) (func(string) string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return getenv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(strings.TrimPrefix(k, "export "))
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		vals[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return vals[k]
	}, nil
}
