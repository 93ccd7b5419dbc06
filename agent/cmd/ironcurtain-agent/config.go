package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"ironcurtain.dev/agent/budget"
	"ironcurtain.dev/agent/sandbox"
)

// Environment variables read by the agent. The token is only ever read
// from the environment: secrets never go in flags.
const (
	envMCPURL       = "IRONCURTAIN_MCP_URL"
	envToken        = "IRONCURTAIN_AGENT_TOKEN"
	envModelBaseURL = "IRONCURTAIN_MODEL_BASE_URL"
	envModel        = "IRONCURTAIN_MODEL"
	envMaxSteps     = "IRONCURTAIN_MAX_STEPS"
	envMaxWall      = "IRONCURTAIN_MAX_WALL"
	envMaxTokens    = "IRONCURTAIN_MAX_TOKENS"
	envCodeTimeout  = "IRONCURTAIN_CODE_TIMEOUT"
	envMaxToolCalls = "IRONCURTAIN_MAX_TOOL_CALLS"
	envMaxOutput    = "IRONCURTAIN_MAX_OUTPUT"
)

// settings is the validated configuration of run and chat.
type settings struct {
	mcpURL         string
	token          string
	modelBaseURL   string
	modelID        string
	budget         budget.Limits
	sandbox        sandbox.Limits
	maxReplyTokens int64
	verbose        bool
}

// errUsage marks configuration errors (exit code 2).
var errUsage = errors.New("usage")

// parseSettings reads flags, with environment variables as their defaults,
// and returns the remaining arguments. Errors name the flag or variable.
func parseSettings(name string, args []string, getenv func(string) string, stderr io.Writer) (settings, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s settings
	var err error
	fs.StringVar(&s.mcpURL, "mcp-url", getenv(envMCPURL), "gateway MCP endpoint (env "+envMCPURL+")")
	fs.StringVar(&s.modelBaseURL, "model-base-url", getenv(envModelBaseURL), "gateway model relay, e.g. http://gateway:8080/llm (env "+envModelBaseURL+")")
	fs.StringVar(&s.modelID, "model", getenv(envModel), "model: anthropic:<model>, openai:<model> or replay:<transcript> (env "+envModel+")")
	fs.BoolVar(&s.verbose, "v", false, "show each step's code and result in full")
	fs.Int64Var(&s.maxReplyTokens, "max-reply-tokens", 8192, "output tokens per model reply")
	steps := intFlag(fs, "max-steps", envMaxSteps, getenv, budget.DefaultMaxSteps, "model steps per session; -1 = unlimited", &err)
	tokens := intFlag(fs, "max-tokens", envMaxTokens, getenv, budget.DefaultMaxTokens, "tokens (input+output) per session; -1 = unlimited", &err)
	toolCalls := intFlag(fs, "max-tool-calls", envMaxToolCalls, getenv, sandbox.DefaultMaxToolCalls, "tool calls per execute_code run", &err)
	output := intFlag(fs, "max-output", envMaxOutput, getenv, sandbox.DefaultMaxOutput, "bytes of output per execute_code run", &err)
	wall := durationFlag(fs, "max-wall", envMaxWall, getenv, budget.DefaultMaxWall, "wall-clock time per session; -1s = unlimited", &err)
	codeTimeout := durationFlag(fs, "code-timeout", envCodeTimeout, getenv, sandbox.DefaultScriptTime, "script time per execute_code run (tool calls not counted)", &err)
	if err != nil {
		return s, nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if perr := fs.Parse(args); perr != nil {
		return s, nil, fmt.Errorf("%w: %w", errUsage, perr)
	}
	s.token = getenv(envToken)
	s.budget = budget.Limits{MaxSteps: int(*steps), MaxTokens: *tokens, MaxWall: *wall}
	s.sandbox = sandbox.Limits{ScriptTime: *codeTimeout, MaxToolCalls: int(*toolCalls), MaxOutput: int(*output)}
	switch {
	case strings.TrimSpace(s.mcpURL) == "":
		return s, nil, fmt.Errorf("%w: the gateway MCP URL is not set (--mcp-url or %s)", errUsage, envMCPURL)
	case s.token == "":
		return s, nil, fmt.Errorf("%w: the agent token is not set (%s)", errUsage, envToken)
	case strings.TrimSpace(s.modelID) == "":
		return s, nil, fmt.Errorf("%w: no model chosen (--model or %s: anthropic:<model>, openai:<model> or replay:<transcript>)", errUsage, envModel)
	case *codeTimeout <= 0:
		return s, nil, fmt.Errorf("%w: --code-timeout (%s) must be positive", errUsage, envCodeTimeout)
	case *toolCalls <= 0 || *output <= 0:
		return s, nil, fmt.Errorf("%w: --max-tool-calls and --max-output must be positive", errUsage)
	case s.maxReplyTokens <= 0:
		return s, nil, fmt.Errorf("%w: --max-reply-tokens must be positive", errUsage)
	}
	return s, fs.Args(), nil
}

// intFlag registers an integer flag whose default comes from an
// environment variable; a malformed variable is reported through errp.
func intFlag(fs *flag.FlagSet, name, envName string, getenv func(string) string, def int64, usage string, errp *error) *int64 {
	v := def
	if raw := strings.TrimSpace(getenv(envName)); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil && *errp == nil {
			*errp = fmt.Errorf("%s=%q is not an integer", envName, raw)
		}
		if err == nil {
			v = n
		}
	}
	p := new(int64)
	fs.Int64Var(p, name, v, usage+" (env "+envName+")")
	return p
}

func durationFlag(fs *flag.FlagSet, name, envName string, getenv func(string) string, def time.Duration, usage string, errp *error) *time.Duration {
	v := def
	if raw := strings.TrimSpace(getenv(envName)); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil && *errp == nil {
			*errp = fmt.Errorf("%s=%q is not a duration (e.g. 30m, 10s)", envName, raw)
		}
		if err == nil {
			v = d
		}
	}
	p := new(time.Duration)
	fs.DurationVar(p, name, v, usage+" (env "+envName+")")
	return p
}
