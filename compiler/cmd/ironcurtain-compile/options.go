package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"ironcurtain.dev/compiler/cache"
	"ironcurtain.dev/compiler/gatewayconfig"
	"ironcurtain.dev/compiler/model"
	"ironcurtain.dev/compiler/structured"
	gwconfig "ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/policy"
)

// Defaults of the shared flags.
const (
	defaultConcurrency = 8
	envModel           = "IRONCURTAIN_MODEL"
	logFileName        = "llm-interactions.jsonl"
)

// errUsage marks errors that are the operator's to fix (exit 2).
var errUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// modelFlags configure the model, the cache and the interaction log.
type modelFlags struct {
	spec        string
	baseURL     string
	concurrency int
	retries     int
	cacheDir    string
	noCache     bool
	logPath     string
}

func (m *modelFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	def := getenv(envModel)
	if def == "" {
		def = model.DefaultSpec
	}
	fs.StringVar(&m.spec, "model", def, "model as provider:name, provider anthropic or openai (env "+envModel+"); keys come from ANTHROPIC_API_KEY / OPENAI_API_KEY")
	fs.StringVar(&m.baseURL, "base-url", "", "model endpoint (default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL, else the provider's)")
	fs.IntVar(&m.concurrency, "concurrency", defaultConcurrency, "model calls in flight at once")
	fs.IntVar(&m.retries, "retries", structured.DefaultRetries, "times an invalid reply is sent back for correction")
	fs.StringVar(&m.cacheDir, "cache-dir", "", "cache of validated model replies (default: the user cache directory)")
	fs.BoolVar(&m.noCache, "no-cache", false, "ask the model even when an identical step was answered before")
	fs.StringVar(&m.logPath, "log", "", "JSON-lines log of every model interaction (default: <output>/"+logFileName+")")
}

// session is an opened model with its log.
type session struct {
	runner *structured.Runner
	log    *model.Log
	file   *os.File
}

func (s *session) close() error {
	var err error
	if s.file != nil {
		err = s.file.Close()
	}
	return errors.Join(s.log.Err(), err)
}

// open builds the runner: provider -> interaction log -> concurrency limit.
func (m *modelFlags) open(e env, defaultLogDir string, logger *slog.Logger) (*session, error) {
	spec, err := model.ParseSpec(m.spec)
	if err != nil {
		return nil, usageErr("--model: %v", err)
	}
	cfg, err := model.ConfigFromEnv(spec, m.baseURL, e.getenv)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if m.concurrency < 1 {
		return nil, usageErr("--concurrency must be at least 1")
	}
	provider, err := model.New(cfg)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	logPath := m.logPath
	if logPath == "" {
		logPath = filepath.Join(defaultLogDir, logFileName)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("creating log directory: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening interaction log: %w", err)
	}
	log := model.NewLog(f, e.now)
	var store *cache.Store
	if !m.noCache {
		dir := m.cacheDir
		if dir == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				f.Close()
				return nil, usageErr("no user cache directory (%v); pass --cache-dir or --no-cache", err)
			}
			dir = filepath.Join(base, "ironcurtain-compile")
		}
		if store, err = cache.Open(dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	retries := m.retries
	if retries == 0 {
		retries = -1 // structured: negative means none
	}
	r := &structured.Runner{
		Model:     model.Limit(model.Logged(provider, log, spec.String()), m.concurrency),
		ModelName: spec.String(),
		Cache:     store,
		Log:       log,
		Logger:    logger,
		Retries:   retries,
	}
	return &session{runner: r, log: log, file: f}, nil
}

// settingsFlags configure the engine settings verification uses.
type settingsFlags struct {
	gatewayConfig     string
	sandbox           string
	home              string
	protectedPaths    multiFlag
	protectedBranches multiFlag
	allowDomains      multiFlag
	sandboxSafe       multiFlag
}

// DefaultHome is the home directory ~ expands to during verification when
// neither --home nor the environment says otherwise.
const DefaultHome = "/home/agent"

func (s *settingsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.gatewayConfig, "gateway-config", "", "gateway.yaml to take the sandbox, protected paths and branches and domain allowlists from")
	fs.StringVar(&s.sandbox, "sandbox", "", "sandbox directory (default: gateway.yaml's, else "+gwconfig.DefaultSandbox+")")
	fs.StringVar(&s.home, "home", DefaultHome, "home directory that ~ in rules expands to during verification (the gateway's $HOME)")
	fs.Var(&s.protectedPaths, "protected-path", "extra protected path (repeatable)")
	fs.Var(&s.protectedBranches, "protected-branch", "protected branch (repeatable; default main, master)")
	fs.Var(&s.allowDomains, "allow-domain", "server=pattern domain allowlist entry (repeatable)")
	fs.Var(&s.sandboxSafe, "sandbox-safe-role", "path role sandbox containment resolves (repeatable; default: gateway.yaml's sandbox_safe_roles, else read-path and write-path)")
}

// settings returns the engine settings and the gateway config (may be nil).
func (s *settingsFlags) settings() (policy.Settings, *gatewayconfig.Config, error) {
	var gc *gatewayconfig.Config
	st := policy.Settings{Sandbox: gwconfig.DefaultSandbox, Home: s.home}
	if s.gatewayConfig != "" {
		c, err := gatewayconfig.Load(s.gatewayConfig)
		if err != nil {
			return st, nil, usageErr("--gateway-config: %v", err)
		}
		gc = c
		st = c.Settings(s.home)
	}
	if s.sandbox != "" {
		st.Sandbox = s.sandbox
	}
	if !filepath.IsAbs(st.Sandbox) || filepath.Clean(st.Sandbox) == "/" {
		return st, nil, usageErr("--sandbox: %q must be an absolute directory other than /", st.Sandbox)
	}
	st.ProtectedPaths = append(st.ProtectedPaths, s.protectedPaths...)
	st.ProtectedBranches = append(st.ProtectedBranches, s.protectedBranches...)
	if len(s.sandboxSafe) > 0 {
		st.SandboxSafeRoles = nil
		for _, r := range s.sandboxSafe {
			if err := policy.ValidateSandboxSafeRole(policy.Role(r)); err != nil {
				return st, nil, usageErr("--sandbox-safe-role: %v", err)
			}
			st.SandboxSafeRoles = append(st.SandboxSafeRoles, policy.Role(r))
		}
	}
	for _, v := range s.allowDomains {
		server, pattern, ok := strings.Cut(v, "=")
		if !ok || server == "" {
			return st, nil, usageErr("--allow-domain: %q is not server=pattern", v)
		}
		if err := policy.ValidateDomainPattern(pattern); err != nil {
			return st, nil, usageErr("--allow-domain: %v", err)
		}
		if st.DomainAllowlists == nil {
			st.DomainAllowlists = map[string][]string{}
		}
		st.DomainAllowlists[server] = append(st.DomainAllowlists[server], pattern)
	}
	return st, gc, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// parse parses args into fs, reporting usage errors to stderr.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, exitOK
		}
		return false, exitUsage
	}
	return true, 0
}

// fail prints err and returns the exit code it deserves.
func fail(e env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "ironcurtain-compile %s: %v\n", cmd, err)
	if errors.Is(err, errUsage) || errors.Is(err, model.ErrMissingKey) {
		return exitUsage
	}
	return exitRuntime
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func readAnnotations(path string) (*policy.Annotations, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading tool annotations: %w", err)
	}
	a, err := policy.ParseAnnotations(path, b)
	if err != nil {
		return nil, fmt.Errorf("reading tool annotations: %w", err)
	}
	return a, nil
}
