// Package policycli implements `ironcurtain policy`: check the policy
// artifacts of a directory, or evaluate one call (or a batch of calls) the
// way the gateway would, printing one JSON decision per call.
package policycli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/cli/opscli"
	"ironcurtain.dev/gateway/policy"
)

// Env is what the command may use from its process.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Exit codes.
const (
	exitOK      = 0
	exitInvalid = 1 // the policy or a batch line is invalid
	exitUsage   = 2
)

// maxBatchLine bounds one request line in --batch mode.
const maxBatchLine = 1 << 20

const usage = `usage:
  ironcurtain policy check --policy-dir DIR [--config gateway.yaml] [--sandbox DIR]
  ironcurtain policy eval  --policy-dir DIR [--config gateway.yaml] [--sandbox DIR] --tool server__tool --args JSON
  ironcurtain policy eval  --policy-dir DIR [--config gateway.yaml] [--sandbox DIR] --batch < requests.jsonl
  ironcurtain policy reload [--ops-url URL] [--token-file FILE] [--json]
  ironcurtain policy replay --candidate DIR [--config gateway.yaml] [--since 24h] [--until T] [--session S] [--server X] [--format table|json]

check loads compiled-policy.json, dynamic-lists.json and tool-annotations.json
(and the shadow policy named in the config) and reports every problem with the
file and JSON path. eval prints {"decision","rule","reason"} per call; --batch
reads one {"tool": "server__tool", "args": {...}} object per line. Paths
starting with ~ expand from $HOME; relative paths in calls resolve against the
sandbox. reload asks the running gateway (ops API, operator token) to load,
validate and swap its policy, as SIGHUP does. replay re-evaluates the calls
recorded in Postgres under a candidate policy and exits 1 when any would be
decided more loosely (ironcurtain policy replay --help).
`

// Run runs `ironcurtain policy` with args (without the leading "policy").
func Run(ctx context.Context, args []string, env Env) int {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(env.Stdout, usage)
		return exitOK
	}
	switch args[0] {
	case "check":
		return runCheck(args[1:], env)
	case "eval":
		return runEval(ctx, args[1:], env)
	case "replay":
		return runReplay(ctx, args[1:], env)
	case "reload":
		return opscli.PolicyReload(ctx, args[1:], opscli.Env{Getenv: env.Getenv, Stdout: env.Stdout, Stderr: env.Stderr})
	}
	fmt.Fprintf(env.Stderr, "ironcurtain policy: unknown subcommand %q\n%s", args[0], usage)
	return exitUsage
}

type common struct {
	policyDir, configPath, sandbox string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.policyDir, "policy-dir", "", "directory holding compiled-policy.json (default: policy_dir of --config)")
	fs.StringVar(&c.configPath, "config", "", "gateway.yaml with the deployment settings")
	fs.StringVar(&c.sandbox, "sandbox", "", "sandbox directory (overrides the config)")
}

// load builds the engine the flags describe.
func (c *common) load(env Env) (*policy.Engine, error) {
	var s policy.Settings
	dir := c.policyDir
	if c.configPath != "" {
		cfg, err := config.Load(expandHome(c.configPath, env))
		if err != nil {
			return nil, err
		}
		s = cfg.PolicySettings()
		if dir == "" {
			dir = cfg.PolicyDir
		}
	}
	if dir == "" {
		return nil, errors.New("--policy-dir is required (or a --config with policy_dir)")
	}
	if c.sandbox != "" {
		s.Sandbox = expandHome(c.sandbox, env)
	}
	s.Home = env.Getenv("HOME")
	return policy.LoadDir(expandHome(dir, env), s, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
}

func expandHome(p string, env Env) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home := env.Getenv("HOME"); home != "" {
			return home + p[1:]
		}
	}
	return p
}

func newFlags(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet("ironcurtain policy "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

func runCheck(args []string, env Env) int {
	var c common
	fs := newFlags("check", env)
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "ironcurtain policy check: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	e, err := c.load(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "policy check failed: %v\n", err)
		return exitInvalid
	}
	for _, w := range e.Warnings() {
		fmt.Fprintf(env.Stderr, "warning: %s\n", w)
	}
	if len(e.Tools()) == 0 {
		fmt.Fprintln(env.Stderr, "warning: no tool annotations were loaded: every call is denied as an unknown tool (set annotations_file in the config)")
	}
	report := func(name string, e *policy.Engine) {
		fmt.Fprintf(env.Stdout, "%s: ok (%d rules, %d tools)\n", name, e.RuleCount(), len(e.Tools()))
		for _, f := range e.AnnotationFiles() {
			fmt.Fprintf(env.Stdout, "  annotations: %s\n", f)
		}
	}
	report("policy", e)
	if s := e.Shadow(); s != nil {
		for _, w := range s.Warnings() {
			fmt.Fprintf(env.Stderr, "warning: shadow: %s\n", w)
		}
		report("shadow policy", s)
	}
	return exitOK
}

// output is the JSON printed per decision.
type output struct {
	Decision       string        `json:"decision"`
	Rule           string        `json:"rule"`
	Reason         string        `json:"reason"`
	EscalatedRoles []policy.Role `json:"escalatedRoles,omitempty"`
	Shadow         *output       `json:"shadow,omitempty"`
}

func toOutput(d policy.Decision) output {
	return output{Decision: d.Status.String(), Rule: d.Rule, Reason: d.Reason, EscalatedRoles: d.EscalatedRoles}
}

func runEval(ctx context.Context, args []string, env Env) int {
	var c common
	var toolName, argsJSON string
	var batch bool
	fs := newFlags("eval", env)
	c.register(fs)
	fs.StringVar(&toolName, "tool", "", "tool as server__tool")
	fs.StringVar(&argsJSON, "args", "{}", "arguments as a JSON object")
	fs.BoolVar(&batch, "batch", false, `read {"tool": ..., "args": ...} objects, one per line, from stdin`)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "ironcurtain policy eval: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if batch == (toolName != "") {
		fmt.Fprintln(env.Stderr, "ironcurtain policy eval: give either --tool (with --args) or --batch")
		return exitUsage
	}
	req, err := parseRequest(toolName, []byte(argsJSON))
	if !batch && err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy eval: %v\n", err)
		return exitUsage
	}
	e, err := c.load(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy eval: %v\n", err)
		return exitInvalid
	}
	out := json.NewEncoder(env.Stdout)
	out.SetEscapeHTML(false)
	if !batch {
		if err := out.Encode(evaluate(ctx, e, req)); err != nil {
			fmt.Fprintf(env.Stderr, "ironcurtain policy eval: writing: %v\n", err)
			return exitInvalid
		}
		return exitOK
	}
	code := exitOK
	sc := bufio.NewScanner(env.Stdin)
	sc.Buffer(make([]byte, 64*1024), maxBatchLine)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var o output
		var in struct {
			Tool string          `json:"tool"`
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(text, &in); err != nil {
			o, code = output{Decision: "deny", Rule: "invalid-request", Reason: fmt.Sprintf("line %d: %v", line, err)}, exitInvalid
		} else if r, err := parseRequest(in.Tool, in.Args); err != nil {
			o, code = output{Decision: "deny", Rule: "invalid-request", Reason: fmt.Sprintf("line %d: %v", line, err)}, exitInvalid
		} else {
			o = evaluate(ctx, e, r)
		}
		if err := out.Encode(o); err != nil {
			fmt.Fprintf(env.Stderr, "ironcurtain policy eval: writing: %v\n", err)
			return exitInvalid
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(env.Stderr, "ironcurtain policy eval: reading stdin (line %d): %v\n", line+1, err)
		return exitInvalid
	}
	return code
}

func evaluate(ctx context.Context, e *policy.Engine, r policy.Request) output {
	ev := e.Evaluate(ctx, r)
	o := toOutput(ev.Decision)
	if ev.Shadow != nil {
		s := toOutput(*ev.Shadow)
		o.Shadow = &s
	}
	return o
}

// parseRequest splits server__tool and decodes the arguments object.
func parseRequest(tool string, args []byte) (policy.Request, error) {
	server, name, ok := strings.Cut(tool, "__")
	if !ok || server == "" || name == "" {
		return policy.Request{}, fmt.Errorf("tool %q is not server__tool", tool)
	}
	var a map[string]any
	if len(bytes.TrimSpace(args)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(args))
		if err := dec.Decode(&a); err != nil {
			return policy.Request{}, fmt.Errorf("decoding args: %w", err)
		}
		if dec.More() {
			return policy.Request{}, errors.New("decoding args: trailing data after the object")
		}
		if a == nil && !bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
			return policy.Request{}, errors.New("decoding args: must be a JSON object")
		}
	}
	return policy.Request{Server: server, Tool: name, Args: a}, nil
}
