package git

import (
	"context"
	"strconv"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// checkMessage accepts a commit or tag message (passed on stdin, never in
// argv).
func checkMessage(arg, m string) error {
	switch {
	case strings.TrimSpace(m) == "":
		return refuse("%s is empty", arg)
	case len(m) > maxMessageLen:
		return refuse("%s is too long", arg)
	case strings.ContainsRune(m, 0):
		return refuse("%s contains a NUL byte", arg)
	}
	return nil
}

func (s *Server) add(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	files := c.Strings("files")
	if len(files) == 0 && !c.Bool("all") {
		return servers.Result{}, refuse("name files to stage or set all")
	}
	paths, err := s.pathspecs("files", r.repo.WorkTree, files)
	if err != nil {
		return servers.Result{}, err
	}
	args := []string{"add", "--verbose"}
	if c.Bool("all") {
		args = append(args, "--all")
	}
	args = append(append(args, "--"), paths...)
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git add failed", err: err}
	}
	return textResult(res.Stdout, "(nothing to stage)"), nil
}

func (s *Server) commit(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	msg := c.Str("message")
	if err := checkMessage("message", msg); err != nil {
		return servers.Result{}, err
	}
	args := []string{"commit", "--no-verify", "--no-gpg-sign", "--file=-"}
	if c.Bool("all") {
		args = append(args, "--all")
	}
	if c.Bool("amend") {
		args = append(args, "--amend")
	}
	if c.Bool("allow_empty") {
		args = append(args, "--allow-empty")
	}
	res, err := s.runStdin(ctx, r, msg, args...)
	if err != nil {
		return servers.Result{}, gitFailure("git commit failed", res, err)
	}
	return textResult(res.Stdout, "committed"), nil
}

func (s *Server) branch(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, op, err := s.openRepoFor(ctx, c, "list")
	if err != nil {
		return servers.Result{}, err
	}
	var args []string
	switch op {
	case "list":
		args = []string{"branch", "--list", "-vv", "--no-color"}
		if c.Bool("all") {
			args = append(args, "--all")
		}
	case "create":
		if err := checkRefName("name", c.Str("name")); err != nil {
			return servers.Result{}, err
		}
		args = []string{"branch", "--end-of-options", c.Str("name")}
		if c.Has("start_point") {
			if err := checkRevision("start_point", c.Str("start_point")); err != nil {
				return servers.Result{}, err
			}
			args = append(args, c.Str("start_point"))
		}
	case "delete":
		if err := checkRevision("name", c.Str("name")); err != nil {
			return servers.Result{}, err
		}
		flag := "-d"
		if c.Bool("force") {
			flag = "-D"
		}
		args = []string{"branch", flag, "--end-of-options", c.Str("name")}
	case "rename":
		if err := checkRevision("name", c.Str("name")); err != nil {
			return servers.Result{}, err
		}
		if err := checkRefName("new_name", c.Str("new_name")); err != nil {
			return servers.Result{}, err
		}
		args = []string{"branch", "-m", "--end-of-options", c.Str("name"), c.Str("new_name")}
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git branch " + op + " failed", err: err}
	}
	done := map[string]string{"create": "created branch " + c.Str("name"), "delete": "deleted branch " + c.Str("name"),
		"rename": "renamed branch " + c.Str("name") + " to " + c.Str("new_name")}[op]
	return textResult(res.Stdout, done), nil
}

// checkout switches branches (git switch) or restores files (git restore):
// both accept --end-of-options or "--", unlike git checkout.
func (s *Server) checkout(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	target := c.Str("target")
	if c.Has("target") {
		if err := checkRevision("target", target); err != nil {
			return servers.Result{}, err
		}
	}
	var args []string
	if files := c.Strings("paths"); len(files) > 0 {
		if c.Bool("create_branch") || c.Bool("detach") {
			return servers.Result{}, refuse("paths cannot be combined with create_branch or detach")
		}
		paths, err := s.pathspecs("paths", r.repo.WorkTree, files)
		if err != nil {
			return servers.Result{}, err
		}
		args = []string{"restore", "--worktree"}
		if target != "" {
			args = append(args, "--source="+target)
		}
		args = append(append(args, "--"), paths...)
	} else {
		if target == "" {
			return servers.Result{}, refuse("target is required unless paths are given")
		}
		switch {
		case c.Bool("create_branch"):
			if err := checkRefName("target", target); err != nil {
				return servers.Result{}, err
			}
			args = []string{"switch", "--create", target}
			if c.Has("start_point") {
				if err := checkRevision("start_point", c.Str("start_point")); err != nil {
					return servers.Result{}, err
				}
				args = append(args, "--end-of-options", c.Str("start_point"))
			}
		case c.Bool("detach"):
			args = []string{"switch", "--detach", "--end-of-options", target}
		default:
			args = []string{"switch", "--end-of-options", target}
		}
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git checkout failed", err: err}
	}
	out := strings.TrimSpace(string(res.Stdout) + "\n" + string(res.Stderr))
	if out == "" {
		out = "done"
	}
	return servers.Text(s.redact(gitexec.CleanText(out))), nil
}

// sequencerOp handles the continue/abort/skip forms shared by merge,
// rebase and cherry-pick.
func sequencerOp(cmd, op string) ([]string, bool) {
	switch op {
	case "continue", "abort", "skip", "quit":
		if cmd == "merge" && op == "skip" {
			return nil, false
		}
		return []string{cmd, "--" + op}, true
	}
	return nil, false
}

// sequenced runs merge, rebase or cherry-pick: the continue/abort/skip
// forms (sequencerOp) or, without an operation, the command build returns;
// done is what a silent success reports.
func (s *Server) sequenced(ctx context.Context, c *toolargs.Args, cmd, done string, build func() ([]string, error)) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	args, ok := sequencerOp(cmd, c.Str("operation"))
	if !ok {
		if args, err = build(); err != nil {
			return servers.Result{}, err
		}
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, gitFailure("git "+cmd+" failed", res, err)
	}
	return textResult(append(res.Stdout, res.Stderr...), done), nil
}

func (s *Server) merge(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	return s.sequenced(ctx, c, "merge", "merged", func() ([]string, error) {
		if err := checkRevision("branch", c.Str("branch")); err != nil {
			return nil, err
		}
		args := []string{"merge", "--no-edit", "--no-verify", "--no-gpg-sign", "--no-stat"}
		switch {
		case c.Bool("no_ff") && c.Bool("ff_only"):
			return nil, refuse("no_ff and ff_only exclude each other")
		case c.Bool("no_ff"):
			args = append(args, "--no-ff")
		case c.Bool("ff_only"):
			args = append(args, "--ff-only")
		}
		if c.Has("message") {
			if err := checkMessage("message", c.Str("message")); err != nil {
				return nil, err
			}
			args = append(args, "--message="+c.Str("message"))
		}
		return append(args, "--end-of-options", c.Str("branch")), nil
	})
}

// rebase is never interactive and never --exec: no argument reaches those.
func (s *Server) rebase(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	return s.sequenced(ctx, c, "rebase", "rebased", func() ([]string, error) {
		if err := checkRevision("upstream", c.Str("upstream")); err != nil {
			return nil, err
		}
		args := []string{"rebase", "--no-autosquash", "--no-verify", "--no-gpg-sign", "--no-update-refs"}
		if c.Has("onto") {
			if err := checkRevision("onto", c.Str("onto")); err != nil {
				return nil, err
			}
			args = append(args, "--onto="+c.Str("onto"))
		}
		return append(args, "--end-of-options", c.Str("upstream")), nil
	})
}

func (s *Server) cherryPick(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	return s.sequenced(ctx, c, "cherry-pick", "done", func() ([]string, error) {
		commits := c.Strings("commits")
		if len(commits) == 0 || len(commits) > 100 {
			return nil, refuse("commits must name 1 to 100 commits")
		}
		args := []string{"cherry-pick", "--no-gpg-sign", "--end-of-options"}
		for i, cm := range commits {
			if err := checkRevision("commits["+strconv.Itoa(i)+"]", cm); err != nil {
				return nil, err
			}
			args = append(args, cm)
		}
		return args, nil
	})
}

func (s *Server) reset(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	target := "HEAD"
	if c.Has("target") {
		target = c.Str("target")
		if err := checkRevision("target", target); err != nil {
			return servers.Result{}, err
		}
	}
	mode := c.Str("mode")
	// reset does not know --end-of-options: the revision is validated (no
	// leading '-') and a "--" ends it.
	var args []string
	if files := c.Strings("paths"); len(files) > 0 {
		if mode != "" && mode != "mixed" {
			return servers.Result{}, refuse("paths can only be unstaged (mode mixed)")
		}
		paths, err := s.pathspecs("paths", r.repo.WorkTree, files)
		if err != nil {
			return servers.Result{}, err
		}
		args = append([]string{"reset", "-q", target, "--"}, paths...)
	} else {
		if mode == "" {
			mode = "mixed"
		}
		args = []string{"reset", "-q", "--" + mode, target, "--"}
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git reset failed", err: err}
	}
	return textResult(res.Stdout, "reset to "+target), nil
}

func (s *Server) stash(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, op, err := s.openRepoFor(ctx, c, "push")
	if err != nil {
		return servers.Result{}, err
	}
	entry := "stash@{0}"
	if n, ok := c.Int("index"); ok {
		entry = "stash@{" + strconv.FormatInt(n, 10) + "}"
	}
	var args []string
	switch op {
	case "push":
		args = []string{"stash", "push"}
		if c.Bool("include_untracked") {
			args = append(args, "--include-untracked")
		}
		if c.Has("message") {
			if err := checkMessage("message", c.Str("message")); err != nil {
				return servers.Result{}, err
			}
			args = append(args, "--message="+c.Str("message"))
		}
	case "list":
		args = []string{"stash", "list"}
	case "show":
		args = append(append([]string{"stash", "show", "--patch"}, diffSafety...), entry)
	case "pop", "apply", "drop":
		args = []string{"stash", op, entry}
	case "clear":
		args = []string{"stash", "clear"}
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, gitFailure("git stash "+op+" failed", res, err)
	}
	return textResult(append(res.Stdout, res.Stderr...), "done"), nil
}

func (s *Server) tag(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, op, err := s.openRepoFor(ctx, c, "list")
	if err != nil {
		return servers.Result{}, err
	}
	var res []byte
	switch op {
	case "list":
		out, err := s.run(ctx, r, "tag", "--list", "-n1")
		if err != nil {
			return servers.Result{}, &toolError{msg: "git tag list failed", err: err}
		}
		return textResult(out.Stdout, "(no tags)"), nil
	case "create":
		if err := checkRefName("name", c.Str("name")); err != nil {
			return servers.Result{}, err
		}
		args := []string{"tag", "--no-sign"}
		stdin := ""
		if c.Has("message") {
			if err := checkMessage("message", c.Str("message")); err != nil {
				return servers.Result{}, err
			}
			args = append(args, "--annotate", "--file=-")
			stdin = c.Str("message")
		}
		args = append(args, "--end-of-options", c.Str("name"))
		if c.Has("target") {
			if err := checkRevision("target", c.Str("target")); err != nil {
				return servers.Result{}, err
			}
			args = append(args, c.Str("target"))
		}
		out, err := s.runStdin(ctx, r, stdin, args...)
		if err != nil {
			return servers.Result{}, &toolError{msg: "git tag create failed", err: err}
		}
		res = out.Stdout
	case "delete":
		if err := checkRevision("name", c.Str("name")); err != nil {
			return servers.Result{}, err
		}
		out, err := s.run(ctx, r, "tag", "--delete", "--end-of-options", c.Str("name"))
		if err != nil {
			return servers.Result{}, &toolError{msg: "git tag delete failed", err: err}
		}
		res = out.Stdout
	}
	return textResult(res, op+"d tag "+c.Str("name")), nil
}
