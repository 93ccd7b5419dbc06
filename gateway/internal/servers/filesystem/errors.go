package filesystem

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// errOutside marks a path outside the sandbox.
var errOutside = errors.New("path outside the sandbox")

// errChanged marks a file that changed between the check and the use
// (swapped for a symlink or another file).
var errChanged = errors.New("file changed during the operation")

// errCodeFile is the refusal of a write to a file that makes git or a
// shell run code (policy.IsProtectedRepoPath). The policy engine refuses
// these writes first (its protected-path invariant); the server checks the
// same rule again, in case a call reaches it some other way.
var errCodeFile = &toolError{msg: "access denied: writing git metadata or environment files (.git, .gitmodules, .gitattributes, .env, .envrc) is forbidden"}

// toolError carries the agent-safe message of a failure next to its detail.
type toolError struct {
	msg   string // shown to the agent
	err   error  // detail, logged only
	cause bool   // append a safe phrase naming the OS-level cause of err
}

func (e *toolError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *toolError) Unwrap() error { return e.err }

// failf wraps a detail error with an agent-safe message.
// The agent sees msg followed by a fixed phrase for the cause when err is a
// well-known OS error ("reading file: no such file or directory").
func failf(msg string, err error) error { return &toolError{msg: msg, err: err, cause: true} }

// safeMessage returns the text the agent sees for err: an argument
// refusal's or a toolError's own message, or a fixed phrase for well-known
// OS errors. Raw error strings are never passed through: they can hold host
// paths.
func safeMessage(err error) string {
	var ae *toolargs.Error
	if errors.As(err, &ae) {
		return ae.Error()
	}
	var te *toolError
	if errors.As(err, &te) {
		if !te.cause || te.err == nil {
			return te.msg
		}
		if inner := safeMessage(te.err); inner != genericFailure {
			return te.msg + ": " + inner
		}
		return te.msg
	}
	if p := osPhrase(err); p != "" {
		return p
	}
	return genericFailure
}

const genericFailure = "operation failed"

// osPhrase names an OS-level failure without its paths, or returns "".
func osPhrase(err error) string {
	switch {
	case errors.Is(err, errOutside):
		return "access denied: path is outside the sandbox"
	case errors.Is(err, errChanged):
		return "access denied: the file changed during the operation"
	case isEscape(err):
		return "access denied: path leaves the sandbox"
	case errors.Is(err, syscall.ELOOP):
		return "access denied: too many levels of symbolic links"
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrExist):
		return "already exists"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, syscall.ENOTDIR):
		return "not a directory"
	case errors.Is(err, syscall.EISDIR):
		return "is a directory"
	case errors.Is(err, syscall.ENOTEMPTY):
		return "directory not empty"
	case errors.Is(err, syscall.EXDEV):
		return "cannot move across file systems"
	case errors.Is(err, syscall.EINVAL):
		return "invalid argument"
	case errors.Is(err, syscall.ENOSPC):
		return "no space left on device"
	case errors.Is(err, syscall.ENAMETOOLONG):
		return "file name too long"
	}
	return ""
}

// isEscape recognises os.Root's refusal to leave the root. The sentinel is
// not exported, so the (stable) message is matched.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
