package git

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// diffSafety are the options of every command that renders diffs: no
// external diff program and no textconv filter ever runs.
var diffSafety = []string{"--no-ext-diff", "--no-textconv", "--no-color"}

// textResult renders a command's stdout (or a placeholder when empty).
func textResult(out []byte, empty string) servers.Result {
	s := gitexec.CleanText(string(out))
	if strings.TrimSpace(s) == "" {
		s = empty
	}
	return servers.Text(s)
}

// gitFailure wraps a failed run for display: git's stdout is added for the
// commands that report conflicts there (merge, rebase, cherry-pick, pull).
func gitFailure(what string, res gitexec.Result, err error) error {
	var ge *gitexec.Error
	if errors.As(err, &ge) && len(strings.TrimSpace(string(res.Stdout))) > 0 {
		combined := *ge
		combined.Stderr = strings.TrimSpace(string(res.Stdout)) + "\n" + ge.Stderr
		return &toolError{msg: what, err: &combined}
	}
	return &toolError{msg: what, err: err}
}

func (s *Server) status(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	args := []string{"status", "--untracked-files=all"}
	if c.Bool("short") {
		args = append(args, "--short", "--branch")
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git status failed", err: err}
	}
	return textResult(res.Stdout, "(clean)"), nil
}

func (s *Server) diff(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	args := append([]string{"diff"}, diffSafety...)
	if c.Bool("staged") {
		if c.Has("target") {
			return servers.Result{}, refuse("staged compares the index with base; target cannot be used with it")
		}
		args = append(args, "--cached")
	}
	if c.Bool("stat") {
		args = append(args, "--stat")
	}
	if n, ok := c.Int("context_lines"); ok {
		args = append(args, "-U"+strconv.FormatInt(n, 10))
	}
	args = append(args, "--end-of-options")
	for _, name := range []string{"base", "target"} {
		if c.Has(name) {
			if err := checkRevision(name, c.Str(name)); err != nil {
				return servers.Result{}, err
			}
			args = append(args, c.Str(name))
		}
	}
	if c.Has("target") && !c.Has("base") {
		return servers.Result{}, refuse("target needs base")
	}
	return s.readPaths(ctx, r, c, args, "diff", "(no differences)")
}

func (s *Server) logTool(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	n := int64(20)
	if v, ok := c.Int("max_count"); ok && v > 0 {
		n = v
	}
	args := append([]string{"log"}, diffSafety...)
	args = append(args, "--no-show-signature", "--max-count="+strconv.FormatInt(n, 10), "--date=iso-strict")
	if c.Bool("oneline") {
		args = append(args, "--oneline")
	}
	if c.Bool("stat") {
		args = append(args, "--stat")
	}
	args = append(args, "--end-of-options")
	if c.Has("revision") {
		if err := checkRevision("revision", c.Str("revision")); err != nil {
			return servers.Result{}, err
		}
		args = append(args, c.Str("revision"))
	}
	return s.readPaths(ctx, r, c, args, "log", "(no commits)")
}

func (s *Server) show(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	rev := "HEAD"
	if c.Has("revision") {
		rev = c.Str("revision")
		if err := checkRevision("revision", rev); err != nil {
			return servers.Result{}, err
		}
	}
	args := append([]string{"show"}, diffSafety...)
	args = append(args, "--no-show-signature", "--date=iso-strict")
	if c.Bool("stat") {
		args = append(args, "--stat")
	}
	args = append(args, "--end-of-options", rev)
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git show failed", err: err}
	}
	return textResult(res.Stdout, "(empty)"), nil
}

func (s *Server) blame(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	files, err := s.pathspecs("file", r.repo.WorkTree, []string{c.Str("file")})
	if err != nil {
		return servers.Result{}, err
	}
	// blame does not know --end-of-options: the revision is validated
	// (no leading '-') and the file follows "--".
	args := []string{"blame", "--no-textconv", "--date=short"}
	start, hasStart := c.Int("start_line")
	end, hasEnd := c.Int("end_line")
	if hasStart || hasEnd {
		if !hasStart {
			start = 1
		}
		if start == 0 || (hasEnd && end < start) {
			return servers.Result{}, refuse("start_line must be at least 1 and end_line at least start_line")
		}
		rng := "-L" + strconv.FormatInt(start, 10) + ","
		if hasEnd {
			rng += strconv.FormatInt(end, 10)
		}
		args = append(args, rng)
	}
	if c.Has("revision") {
		if err := checkRevision("revision", c.Str("revision")); err != nil {
			return servers.Result{}, err
		}
		args = append(args, c.Str("revision"))
	}
	args = append(args, "--", files[0])
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git blame failed", err: err}
	}
	return textResult(res.Stdout, "(empty file)"), nil
}

// readPaths runs a read-only command on the pathspecs of the "paths"
// argument (after a "--"); empty is what no output reports.
func (s *Server) readPaths(ctx context.Context, r *repoHandle, c *toolargs.Args, args []string, what, empty string) (servers.Result, error) {
	paths, err := s.pathspecs("paths", r.repo.WorkTree, c.Strings("paths"))
	if err != nil {
		return servers.Result{}, err
	}
	args = append(append(args, "--"), paths...)
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git " + what + " failed", err: err}
	}
	return textResult(res.Stdout, empty), nil
}
