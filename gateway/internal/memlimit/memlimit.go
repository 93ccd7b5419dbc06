// Package memlimit sets the Go runtime's soft memory limit (GOMEMLIMIT)
// from the memory limit of the container the gateway runs in, so the
// garbage collector works harder as the gateway nears the limit instead of
// the kernel killing it (issue 24 item 12: eight wide calls took the
// gateway to 2 GB, and 1.76 GB stayed a minute later).
//
// The limit is read from cgroup v2 (memory.max of the process's cgroup and
// of its ancestors, the smallest wins) or cgroup v1
// (memory/memory.limit_in_bytes). Nothing is set when GOMEMLIMIT is in the
// environment (the operator's choice wins) or when no limit is found.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// Fraction is the share of the container's limit given to the Go heap;
// the rest is for goroutine stacks, the runtime and the kernel's view of
// the process (page cache charged to the cgroup, fragmentation).
const Fraction = 0.9

// noLimitV1 is the smallest value cgroup v1 reports for "no limit"
// (page-aligned math.MaxInt64); anything above 2^62 is no limit.
const noLimitV1 = 1 << 62

// Limit returns the memory limit of the cgroup of the process, in bytes,
// reading the cgroup file systems under root ("/" in production). ok is
// false when there is no limit.
func Limit(root fs.FS) (limit int64, source string, ok bool, err error) {
	// cgroup v2: /proc/self/cgroup has "0::/path".
	if rel, found := v2Path(root); found {
		best, src := int64(math.MaxInt64), ""
		for p := rel; ; p = path.Dir(p) {
			file := path.Join("sys/fs/cgroup", p, "memory.max")
			if n, ok, err := readLimit(root, file); err != nil {
				return 0, "", false, err
			} else if ok && n < best {
				best, src = n, "/"+file
			}
			if p == "." || p == "/" || p == "" {
				break
			}
		}
		if src != "" {
			return best, src, true, nil
		}
	}
	file := "sys/fs/cgroup/memory/memory.limit_in_bytes"
	n, ok, err := readLimit(root, file)
	if err != nil || !ok {
		return 0, "", false, err
	}
	return n, "/" + file, true, nil
}

// v2Path returns the process's cgroup v2 path, relative ("." for the root).
func v2Path(root fs.FS) (string, bool) {
	f, err := root.Open("proc/self/cgroup")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			rel := strings.Trim(path.Clean("/"+rest), "/")
			if rel == "" {
				rel = "."
			}
			return rel, true
		}
	}
	return "", false
}

// readLimit reads one limit file; a missing file or "max" is no limit.
func readLimit(root fs.FS, file string) (int64, bool, error) {
	b, err := fs.ReadFile(root, file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", file, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" || s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %q is not a number of bytes", file, s)
	}
	if n <= 0 || n >= noLimitV1 {
		return 0, false, nil
	}
	return n, true, nil
}

// Apply sets the runtime's soft memory limit to Fraction of the
// container's limit, unless GOMEMLIMIT is set in the environment, and
// logs what it did. It returns the limit set (0: none).
func Apply(getenv func(string) string, log *slog.Logger) int64 {
	return apply(os.DirFS("/"), getenv, log, debug.SetMemoryLimit)
}

func apply(root fs.FS, getenv func(string) string, log *slog.Logger, set func(int64) int64) int64 {
	if v := getenv("GOMEMLIMIT"); v != "" {
		log.Info("Go memory limit set by GOMEMLIMIT", "GOMEMLIMIT", v)
		return 0
	}
	limit, src, ok, err := Limit(root)
	if err != nil {
		log.Warn("container memory limit not read; no Go memory limit set", "err", err)
		return 0
	}
	if !ok {
		log.Info("no container memory limit found; no Go memory limit set")
		return 0
	}
	soft := int64(float64(limit) * Fraction)
	set(soft)
	log.Info("Go memory limit derived from the container's", "container_limit_bytes", limit, "source", src, "gomemlimit_bytes", soft)
	return soft
}
