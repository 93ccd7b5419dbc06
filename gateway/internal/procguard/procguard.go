// Package procguard hardens the gateway process against the code it starts. The gateway holds
// every credential, in its environment and its memory; a child of the same uid (a `command:`
// MCP server, a git helper) could read them through /proc/<gateway>/environ, mem or fd/ while
// the gateway is dumpable. NonDumpable turns that off: the kernel then owns the gateway's /proc
// entries and refuses them to anything without CAP_SYS_PTRACE.
package procguard

import "errors"

// ErrUnsupported is returned where the platform has no dumpable flag to clear (every system but
// Linux); the caller logs it and carries on.
var ErrUnsupported = errors.New("making the process non-dumpable is only supported on Linux")

// NonDumpable makes the calling process non-dumpable (prctl PR_SET_DUMPABLE 0) and checks that
// the flag reads back as cleared. Call it first thing at start-up, before any child is started
// and before secrets are read. It is process-wide and lasts until exec.
func NonDumpable() error { return nonDumpable() }

// Dumpable reports whether the process is dumpable now.
func Dumpable() (bool, error) { return dumpable() }
