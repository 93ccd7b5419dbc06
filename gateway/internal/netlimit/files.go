package netlimit

import (
	"errors"
	"fmt"
)

// The open-file limit is the one cap every listener shares: a connection is a descriptor, and
// a listener that reaches the process's RLIMIT_NOFILE stops every other one too (accept4 fails
// with EMFILE on the ops port, Postgres and upstream dials fail). So the caps of the listeners
// are derived from the real limit: PlanFiles fits them, with a reserve, into it.

// BaseFileReserve is what PlanFiles keeps for everything that is not a listener's
// connection: standard streams, the poller, log and spool files, policy reloads, git and tool
// server child processes' pipes. The Postgres pool's connections are reserved on top.
const BaseFileReserve = 128

// minListenerFiles is the fewest descriptors a limit must leave each listener after the
// reserve; below it the gateway refuses to start rather than serve nothing.
const minListenerFiles = 16

// reservedShare is the part of what is left after the reserve that the reserved listeners (the
// ops API) may take before the others are sized: the operator's listener never competes with
// the agent's for descriptors.
const reservedShare = 4 // one quarter

// FileDemand is one listener as PlanFiles sees it.
type FileDemand struct {
	Name   string // for errors and logs: "agent", "ops", "egress"
	Limits Limits // the configured caps (valid)
	// FilesPerConn is how many descriptors one of its connections may hold: 1, or 2 when a
	// connection may hold an upstream connection too (a tunnel, a relayed call).
	FilesPerConn int
	// Reserved listeners are sized first, from a quarter of what the reserve leaves (the ops
	// API).
	Reserved bool
}

// FilePlan is one listener's caps after PlanFiles.
type FilePlan struct {
	Name    string
	Limits  Limits
	Reduced bool // lower than configured, to fit the open-file limit
}

// ErrFileLimit is returned (wrapped) when the open-file limit is too low to serve at all.
var ErrFileLimit = errors.New("the open-file limit is too low")

// PlanFiles fits the listeners' connection caps into limit open files (the soft RLIMIT_NOFILE
// after RaiseFileLimit; 0 means unknown: the caps are kept) with reserve descriptors kept for
// everything else. Reserved listeners keep their caps up to a quarter of what the reserve
// leaves; the others share the rest in proportion to their configured caps (times
// FilesPerConn). A cap is never raised; a per-client cap never exceeds its listener's cap.
// It fails when the limit leaves fewer than 16 descriptors per listener.
func PlanFiles(limit uint64, reserve int, ds []FileDemand) ([]FilePlan, error) {
	out := make([]FilePlan, len(ds))
	for i, d := range ds {
		if err := d.Limits.Validate(d.Name); err != nil {
			return nil, fmt.Errorf("planning open files: %w", err)
		}
		if d.FilesPerConn < 1 {
			return nil, fmt.Errorf("planning open files: %s: FilesPerConn must be >= 1, not %d", d.Name, d.FilesPerConn)
		}
		out[i] = FilePlan{Name: d.Name, Limits: d.Limits}
	}
	if limit == 0 {
		return out, nil
	}
	if reserve < 0 {
		return nil, fmt.Errorf("planning open files: negative reserve %d", reserve)
	}
	const maxLimit = 1 << 40 // RLIM_INFINITY and other huge values: no listener comes near
	lim := int64(min(limit, maxLimit))
	avail := lim - int64(reserve)
	if need := int64(minListenerFiles * len(ds)); avail < need {
		return nil, fmt.Errorf("%w: %d open files leave %d after the reserve of %d; %d listeners need at least %d (raise the hard limit: ulimit -n, or the container's nofile)",
			ErrFileLimit, limit, max(avail, 0), reserve, len(ds), need)
	}
	// Reserved listeners first, from their share.
	var reservedCount int64
	for _, d := range ds {
		if d.Reserved {
			reservedCount++
		}
	}
	if reservedCount > 0 {
		each := avail / reservedShare / reservedCount
		for i, d := range ds {
			if d.Reserved {
				out[i] = fit(d, each/int64(d.FilesPerConn))
				avail -= int64(out[i].Limits.MaxConns * d.FilesPerConn)
			}
		}
	}
	// The others in proportion to what they ask for.
	var demand int64
	for _, d := range ds {
		if !d.Reserved {
			demand += int64(d.Limits.MaxConns) * int64(d.FilesPerConn)
		}
	}
	if demand <= avail {
		return out, nil
	}
	// Each gets one connection, and the rest in proportion (rounded down: the sum stays
	// within avail).
	rest := avail
	for _, d := range ds {
		if !d.Reserved {
			rest -= int64(d.FilesPerConn)
		}
	}
	for i, d := range ds {
		if !d.Reserved {
			share := rest * int64(d.Limits.MaxConns) * int64(d.FilesPerConn) / demand
			out[i] = fit(d, 1+share/int64(d.FilesPerConn))
		}
	}
	return out, nil
}

// fit caps d's connections at conns (at least 1).
func fit(d FileDemand, conns int64) FilePlan {
	p := FilePlan{Name: d.Name, Limits: d.Limits}
	conns = max(conns, 1)
	if int64(p.Limits.MaxConns) > conns {
		p.Limits.MaxConns = int(conns)
		p.Reduced = true
	}
	p.Limits.MaxPerClient = min(p.Limits.MaxPerClient, p.Limits.MaxConns)
	return p
}
