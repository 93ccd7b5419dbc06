package git

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
)

// toolError carries the agent-safe message of a failure next to its detail.
type toolError struct {
	msg string // shown to the agent (after redaction)
	err error  // detail, logged only
}

func (e *toolError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *toolError) Unwrap() error { return e.err }

// refuse returns a toolError with a formatted message.
func refuse(format string, a ...any) error {
	return &toolError{msg: fmt.Sprintf(format, a...)}
}

// maxShownStderr caps the git message shown to the agent.
const maxShownStderr = 2000

// safeMessage returns the text the agent sees for err (the caller redacts
// it). git's stderr is shown for a failed command because the agent needs
// it (merge conflicts, rejected pushes); it comes from commands run on the
// agent's own repository or from the remote, and is redacted and capped.
func safeMessage(err error) string {
	var ae *toolargs.Error
	if errors.As(err, &ae) {
		return ae.Error()
	}
	var te *toolError
	if errors.As(err, &te) {
		if te.err != nil {
			var ge *gitexec.Error
			if errors.As(te.err, &ge) {
				return te.msg + ": " + gitMessage(ge)
			}
			if p := phrase(te.err); p != "" {
				return te.msg + ": " + p
			}
		}
		return te.msg
	}
	var ge *gitexec.Error
	if errors.As(err, &ge) {
		return "git " + verb(ge.Args) + " failed: " + gitMessage(ge)
	}
	if p := phrase(err); p != "" {
		return p
	}
	return "git operation failed"
}

// phrase names well-known failures without host detail, or returns "".
func phrase(err error) string {
	switch {
	case errors.Is(err, gitexec.ErrExecutableConfig):
		keys := ""
		if _, after, ok := strings.Cut(err.Error(), gitexec.ErrExecutableConfig.Error()+": "); ok {
			keys = " (" + toolargs.Clip(after) + ")"
		}
		return "refused: the repository config defines settings that run programs" + keys
	case errors.Is(err, gitexec.ErrUnsafeGitDir):
		msg := err.Error()
		if i := strings.Index(msg, gitexec.ErrUnsafeGitDir.Error()); i >= 0 {
			msg = msg[i:]
		}
		return "refused: " + msg
	case errors.Is(err, gitexec.ErrNoRepo):
		return "not a git repository inside the sandbox"
	case errors.Is(err, gitexec.ErrTimeout):
		return "git timed out"
	case errors.Is(err, gitexec.ErrOutputLimit):
		return "git output is too large; narrow the request"
	case errors.Is(err, policy.ErrPushRefused), errors.Is(err, policy.ErrRefspec):
		return policyMessage(err)
	case errors.Is(err, policy.ErrRemote):
		return policyMessage(err)
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrExist):
		return "already exists"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	return ""
}

// policyMessage shows a policy refusal: its text is written to be safe for
// the agent, except that a wrapped git failure carries git's stderr, which
// is cut off.
func policyMessage(err error) string {
	msg := err.Error()
	var ge *gitexec.Error
	if errors.As(err, &ge) {
		if i := strings.Index(msg, ge.Error()); i >= 0 {
			msg = strings.TrimRight(msg[:i], ": ") + ": git could not resolve it"
		}
	}
	return msg
}

// gitMessage is git's stderr, cleaned for display.
func gitMessage(ge *gitexec.Error) string {
	msg := strings.TrimSpace(gitexec.CleanText(ge.Stderr))
	if msg == "" {
		return fmt.Sprintf("exit status %d", ge.ExitCode)
	}
	if len(msg) > maxShownStderr {
		msg = msg[:maxShownStderr] + "..."
	}
	return msg
}

func verb(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// redact removes gateway-private paths and the token from text shown to
// the agent or logged.
func (s *Server) redact(text string) string { return s.mirrors.Redact(text) }
