// Package gitexec runs git for the gateway without ever executing code the
// agent could have written.
//
// Every command is built the same way: no shell, an explicit GIT_DIR (and
// work tree), a minimal environment that does not inherit the gateway's GIT_*
// variables, system and global config switched off, hooks and fsmonitor
// disabled, only the https and ssh transports allowed, a timeout that kills
// the whole process group and a cap on the output. ScanConfig reports
// repository settings that would make git run a program (core.fsmonitor,
// core.sshCommand, filter drivers, credential helpers, include.path, ...):
// callers refuse to operate on such repositories.
//
// NativeConfig and RemoteURLs answer two of those questions without a
// process (one costs milliseconds): what `git config --list` lists and what
// `git remote get-url` prints. They follow git 2.39's code strictly and
// return ErrUnsure whenever they cannot be certain to agree with git;
// callers then run git. Differential tests and a fuzzer compare them with
// the real git.
package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Defaults applied when the corresponding Options field is zero.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultMaxOutput = 4 << 20
)

// Errors reported by Run. They are wrapped; test with errors.Is.
var (
	ErrTimeout     = errors.New("git timed out")
	ErrOutputLimit = errors.New("git output exceeds the limit")
	ErrNoRepo      = errors.New("not a git repository")
	ErrBadOption   = errors.New("invalid gitexec option")
)

// hardenedConfig is passed as -c flags on every run. Command-line config is
// the highest-precedence scope, so these win over anything in the
// repository's own config. protocol.<name>.allow is listed explicitly for the
// dangerous transports because a per-protocol setting in repository config
// would otherwise beat protocol.allow=never.
var hardenedConfig = []string{
	"core.fsmonitor=false",
	"core.hooksPath=/dev/null",
	"core.pager=cat",
	"core.editor=:",
	"core.askPass=",
	"credential.helper=",
	"sequence.editor=:",
	"protocol.allow=never",
	"protocol.https.allow=always",
	"protocol.ssh.allow=always",
	"protocol.http.allow=never",
	"protocol.git.allow=never",
	"protocol.file.allow=never",
	"protocol.ext.allow=never",
	"protocol.fd.allow=never",
	"safe.bareRepository=explicit",
	"submodule.recurse=false",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"color.ui=false",
}

// HardenedConfig returns the key=value pairs every command passes with -c.
func HardenedConfig() []string { return append([]string(nil), hardenedConfig...) }

// Options describe one git invocation. GitDir is required: git never
// discovers a repository on its own.
type Options struct {
	// GitDir is the repository's git directory (GIT_DIR).
	GitDir string
	// WorkTree is the work tree (GIT_WORK_TREE); empty for a bare mirror.
	WorkTree string
	// Dir is the working directory of the process; default WorkTree, else GitDir.
	Dir string
	// Ceiling is GIT_CEILING_DIRECTORIES; default the parent of Dir.
	Ceiling string
	// SafeDirectory is passed as safe.directory; default WorkTree, else GitDir.
	SafeDirectory string
	// Timeout bounds the run; default DefaultTimeout.
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each; default DefaultMaxOutput.
	MaxOutput int
	// Config holds extra key=value pairs passed with -c after the hardened
	// ones (for example a credential helper inside a gateway-private mirror).
	Config []string
	// Env holds extra KEY=VALUE variables (for example GIT_SSH_COMMAND set by
	// the gateway). They cannot replace the hardening variables.
	Env []string
	// Stdin feeds the process; default empty.
	Stdin io.Reader
	// Git is the git binary; default "git" from PATH.
	Git string
	// Quarantine is an object directory directly inside GitDir's
	// "objects" that the gateway created for objects it has not accepted
	// yet (a pushed pack): new objects are written there, and the
	// repository's own objects are read through it as alternates
	// (GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_OBJECT_DIRECTORIES,
	// GIT_QUARANTINE_PATH, which also forbids ref updates). Env may not set
	// these variables.
	Quarantine string
}

// Result is the captured output of a finished command.
type Result struct {
	Stdout []byte
	Stderr []byte
}

// Error is returned when git exits non-zero. Stderr is git's message, capped;
// it may name host paths, so callers log it rather than show it to the agent.
type Error struct {
	Args     []string
	ExitCode int
	Stderr   string
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	verb := ""
	if len(e.Args) > 0 {
		verb = e.Args[0]
	}
	return fmt.Sprintf("git %s: exit status %d: %s", verb, e.ExitCode, msg)
}

// protectedEnv are the variables the caller's Env may not set.
var protectedEnv = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_CEILING_DIRECTORIES": true,
	"GIT_CONFIG_NOSYSTEM": true, "GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true,
	"GIT_CONFIG": true, "GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true,
	"GIT_EXEC_PATH": true, "GIT_TEMPLATE_DIR": true, "GIT_ATTR_NOSYSTEM": true,
	"GIT_ALLOW_PROTOCOL": true, "GIT_PROTOCOL_FROM_USER": true, "GIT_TERMINAL_PROMPT": true,
	"GIT_EXTERNAL_DIFF": true, "GIT_PAGER": true, "GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true,
	"GIT_OBJECT_DIRECTORY": true, "GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_COMMON_DIR": true,
	"GIT_INDEX_FILE": true, "GIT_NAMESPACE": true, "GIT_QUARANTINE_PATH": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true,
	"HOME": true, "XDG_CONFIG_HOME": true, "PATH": true, "PAGER": true, "EDITOR": true, "VISUAL": true,
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true,
}

func (o Options) normalized() (Options, error) {
	if o.GitDir == "" {
		return o, fmt.Errorf("%w: GitDir is required", ErrBadOption)
	}
	if o.Dir == "" {
		o.Dir = o.WorkTree
		if o.Dir == "" {
			o.Dir = o.GitDir
		}
	}
	if o.Ceiling == "" {
		o.Ceiling = parentDir(o.Dir)
	}
	if o.SafeDirectory == "" {
		o.SafeDirectory = o.WorkTree
		if o.SafeDirectory == "" {
			o.SafeDirectory = o.GitDir
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.Git == "" {
		o.Git = "git"
	}
	for _, kv := range o.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, fmt.Errorf("%w: env entry %q is not KEY=VALUE", ErrBadOption, kv)
		}
		if protectedEnv[k] || strings.HasPrefix(k, "GIT_CONFIG_KEY_") || strings.HasPrefix(k, "GIT_CONFIG_VALUE_") {
			return o, fmt.Errorf("%w: env %s may not be overridden", ErrBadOption, k)
		}
	}
	if o.Quarantine != "" {
		objects := strings.TrimRight(o.GitDir, "/") + "/objects"
		if parentDir(o.Quarantine) != objects || strings.Contains(o.Quarantine[len(objects):], "..") || strings.ContainsAny(o.Quarantine, ":\n") {
			return o, fmt.Errorf("%w: Quarantine %q must be a directory directly inside %s", ErrBadOption, o.Quarantine, objects)
		}
	}
	for _, kv := range o.Config {
		if !strings.Contains(kv, "=") || strings.HasPrefix(kv, "-") {
			return o, fmt.Errorf("%w: config entry %q is not key=value", ErrBadOption, kv)
		}
	}
	return o, nil
}

func parentDir(p string) string {
	p = strings.TrimRight(p, "/")
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// Env returns the complete environment of a hardened git process. It starts
// from nothing: only PATH is taken from the gateway's environment.
func (o Options) env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{
		"PATH=" + path,
		"HOME=/nonexistent",
		"XDG_CONFIG_HOME=/nonexistent",
		"LC_ALL=C",
		"LANG=C",
		"GIT_DIR=" + o.GitDir,
		"GIT_CEILING_DIRECTORIES=" + o.Ceiling,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=:",
		"GIT_SEQUENCE_EDITOR=:",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
	}
	if o.WorkTree != "" {
		env = append(env, "GIT_WORK_TREE="+o.WorkTree)
	}
	if o.Quarantine != "" {
		env = append(env, "GIT_OBJECT_DIRECTORY="+o.Quarantine,
			"GIT_ALTERNATE_OBJECT_DIRECTORIES="+parentDir(o.Quarantine),
			"GIT_QUARANTINE_PATH="+o.Quarantine)
	}
	return append(env, o.Env...)
}

// argv returns git's arguments: the hardened -c flags, the caller's -c
// flags, then args.
func (o Options) argv(args []string) []string {
	out := make([]string, 0, 2*(len(hardenedConfig)+len(o.Config)+1)+len(args))
	for _, kv := range hardenedConfig {
		out = append(out, "-c", kv)
	}
	out = append(out, "-c", "safe.directory="+o.SafeDirectory)
	for _, kv := range o.Config {
		out = append(out, "-c", kv)
	}
	return append(out, args...)
}

// Command builds the hardened *exec.Cmd for callers that stream (for example
// a push that reports progress). The caller owns Stdout/Stderr and must
// respect the context for the timeout; prefer Run.
func Command(ctx context.Context, o Options, args ...string) (*exec.Cmd, error) {
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, o.Git, o.argv(args)...)
	cmd.Dir = o.Dir
	cmd.Env = o.env()
	cmd.Stdin = o.Stdin
	cmd.WaitDelay = time.Second
	setProcessGroup(cmd)
	return cmd, nil
}

// Run executes git with args under the hardened environment and returns its
// output. A non-zero exit gives *Error; a timeout gives ErrTimeout; output
// beyond MaxOutput kills the process and gives ErrOutputLimit.
func Run(ctx context.Context, o Options, args ...string) (Result, error) {
	o, err := o.normalized()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd, err := Command(ctx, o, args...)
	if err != nil {
		return Result{}, err
	}
	stdout := &capWriter{max: o.MaxOutput, onOverflow: cancel}
	stderr := &capWriter{max: o.MaxOutput, onOverflow: cancel}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	runErr := cmd.Run()
	res := Result{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes()}
	switch {
	case stdout.overflow || stderr.overflow:
		return res, fmt.Errorf("running git %s: %w", verbOf(args), ErrOutputLimit)
	case ctx.Err() != nil && runErr != nil:
		return res, fmt.Errorf("running git %s: %w", verbOf(args), ErrTimeout)
	case runErr != nil:
		var ee *exec.ExitError
		if errors.As(runErr, &ee) {
			return res, &Error{Args: args, ExitCode: ee.ExitCode(), Stderr: string(res.Stderr)}
		}
		return res, fmt.Errorf("running git %s: %w", verbOf(args), runErr)
	}
	return res, nil
}

func verbOf(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// capWriter keeps at most max bytes and cancels the run when more arrive.
type capWriter struct {
	buf        bytes.Buffer
	max        int
	overflow   bool
	onOverflow func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.overflow {
		return len(p), nil
	}
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:room])
		w.overflow = true
		w.onOverflow()
		return len(p), nil
	}
	return w.buf.Write(p)
}

// CleanText drops control characters other than newline and tab, so that
// git output cannot carry terminal escapes to whoever reads it.
func CleanText(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\r':
			b.WriteByte('\n')
		case (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
