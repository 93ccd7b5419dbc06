package filesystem

import (
	"context"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
)

// writeFile creates or replaces a file (see writeAtomic for the safety
// argument).
func (s *Server) writeFile(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	rel, err := s.resolve(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	if policy.IsProtectedRepoPath(rel) {
		return servers.Result{}, errCodeFile
	}
	content := a.Str("content")
	if int64(len(content)) > s.maxWrite {
		return servers.Result{}, &toolError{msg: fmt.Sprintf("content is too large (%d bytes, limit %d)", len(content), s.maxWrite)}
	}
	if err := s.writeAtomic(rel, []byte(content)); err != nil {
		return servers.Result{}, failf("writing file", err)
	}
	return servers.Text("Successfully wrote to " + s.display(rel)), nil
}

// editFile applies edits to a text file and returns a unified diff; with
// dryRun the file is left alone.
func (s *Server) editFile(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	rel, err := s.resolve(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	edits, _ := a.Value("edits").([]edit)
	if len(edits) == 0 {
		return servers.Result{}, &toolError{msg: "edits must hold at least one edit"}
	}
	dryRun := a.Bool("dryRun")
	if !dryRun && policy.IsProtectedRepoPath(rel) {
		return servers.Result{}, errCodeFile
	}
	original, err := s.readWhole(rel, s.maxRead)
	if err != nil {
		return servers.Result{}, err
	}
	content := normalizeNewlines(string(original))
	modified, err := applyEdits(content, edits)
	if err != nil {
		return servers.Result{}, err
	}
	if !dryRun && int64(len(modified)) > s.maxWrite {
		return servers.Result{}, &toolError{msg: fmt.Sprintf("edited file is too large (%d bytes, limit %d)", len(modified), s.maxWrite)}
	}
	display := s.display(rel)
	diff := fenceDiff(unifiedDiff(display, content, modified))
	if !dryRun {
		if err := s.writeAtomic(rel, []byte(modified)); err != nil {
			return servers.Result{}, failf("writing file", err)
		}
	}
	return servers.Text(diff), nil
}

// fenceDiff wraps a diff in a ```diff block with enough backticks that the
// diff cannot close it.
func fenceDiff(diff string) string {
	n := 3
	for strings.Contains(diff, strings.Repeat("`", n)) {
		n++
	}
	fence := strings.Repeat("`", n)
	return fence + "diff\n" + diff + fence + "\n\n"
}

// createDirectory creates a directory and its missing parents.
func (s *Server) createDirectory(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	rel, err := s.resolve(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	if policy.IsProtectedRepoPath(rel) {
		return servers.Result{}, errCodeFile
	}
	if rel != "." {
		if err := s.root.MkdirAll(rel, 0o755); err != nil {
			return servers.Result{}, failf("creating directory", err)
		}
	}
	return servers.Text("Successfully created directory " + s.display(rel)), nil
}

// moveFile renames a file or directory. The destination must not exist.
// The rename goes through the root: no component of either path may leave
// the sandbox, and a symlink being moved is moved itself, never followed.
func (s *Server) moveFile(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	src, err := s.resolve(a.Str("source"))
	if err != nil {
		return servers.Result{}, err
	}
	dst, err := s.resolve(a.Str("destination"))
	if err != nil {
		return servers.Result{}, err
	}
	if policy.IsProtectedRepoPath(src) || policy.IsProtectedRepoPath(dst) {
		return servers.Result{}, errCodeFile
	}
	if src == "." || dst == "." {
		return servers.Result{}, &toolError{msg: "cannot move the sandbox directory itself"}
	}
	if src == dst {
		return servers.Result{}, &toolError{msg: "source and destination are the same"}
	}
	if strings.HasPrefix(dst, src+"/") {
		return servers.Result{}, &toolError{msg: "cannot move a directory into itself"}
	}
	if _, err := s.root.Lstat(src); err != nil {
		return servers.Result{}, failf("moving file", err)
	}
	if _, err := s.root.Lstat(dst); err == nil {
		return servers.Result{}, &toolError{msg: "destination already exists"}
	} else if !isNotExist(err) {
		return servers.Result{}, failf("moving file", err)
	}
	if err := s.root.Rename(src, dst); err != nil {
		return servers.Result{}, failf("moving file", err)
	}
	return servers.Text("Successfully moved " + s.display(src) + " to " + s.display(dst)), nil
}
