package filesystem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// readDir lists the directory l (checked open: no symlink, no swap),
// sorted by name. More than max entries is an error.
func (s *Server) readDir(l loc) ([]fs.DirEntry, error) {
	f, _, err := l.a.openChecked(l.rel, wantDir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(s.maxEnt + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > s.maxEnt {
		return nil, &toolError{msg: fmt.Sprintf("directory has more than %d entries", s.maxEnt)}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries, nil
}

// listDirectory prints "[DIR] name" / "[FILE] name" lines. Symlinks are
// listed as files and never followed.
func (s *Server) listDirectory(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	l, err := s.resolveRead(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	entries, err := s.readDir(l)
	if err != nil {
		return servers.Result{}, failf("listing directory", err)
	}
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = typeTag(e.IsDir()) + " " + safeName(e.Name())
	}
	return servers.Text(strings.Join(lines, "\n")), nil
}

// listDirectoryWithSizes adds sizes (from lstat: a symlink's target is
// never looked at) and a summary.
func (s *Server) listDirectoryWithSizes(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	l, err := s.resolveRead(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	sortBy := a.Str("sortBy") // "", "name" or "size": the enum is checked when parsing
	entries, err := s.readDir(l)
	if err != nil {
		return servers.Result{}, failf("listing directory", err)
	}
	type row struct {
		name  string
		dir   bool
		size  int64
		order int
	}
	rows := make([]row, len(entries))
	for i, e := range entries {
		r := row{name: e.Name(), dir: e.IsDir(), order: i}
		if info, err := e.Info(); err == nil {
			r.size = info.Size()
		}
		rows[i] = r
	}
	if sortBy == "size" {
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].size > rows[j].size })
	}
	var sb strings.Builder
	files, dirs := 0, 0
	var total int64
	for _, r := range rows {
		name := safeName(r.name)
		if pad := 30 - utf8.RuneCountInString(name); pad > 0 {
			name += strings.Repeat(" ", pad)
		}
		size := ""
		if r.dir {
			dirs++
		} else {
			files++
			total += r.size
			size = formatSize(r.size)
			if pad := 10 - len(size); pad > 0 {
				size = strings.Repeat(" ", pad) + size
			}
		}
		sb.WriteString(typeTag(r.dir) + " " + name + " " + size + "\n")
	}
	fmt.Fprintf(&sb, "\nTotal: %d files, %d directories\nCombined size: %s", files, dirs, formatSize(total))
	return servers.Text(sb.String()), nil
}

func typeTag(dir bool) string {
	if dir {
		return "[DIR]"
	}
	return "[FILE]"
}

// safeName quotes a file name that holds control characters or invalid
// UTF-8, so that a crafted name cannot forge lines of a listing.
func safeName(name string) string {
	if checkText(name) == nil {
		return name
	}
	return strconv.Quote(name)
}

// formatSize renders a byte count like the reference server ("1.50 KB").
func formatSize(n int64) string {
	if n <= 0 {
		return "0 B"
	}
	units := []string{"B", "KB", "MB", "GB", "TB"}
	i := 0
	f := float64(n)
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + " " + units[i]
}

// treeEntry is one node of directory_tree's JSON output. Directories always
// carry a children array, files never do.
type treeEntry struct {
	Name     string       `json:"name"`
	Type     string       `json:"type"`
	Children *[]treeEntry `json:"children,omitempty"`
}

// walker walks a directory tree of one area through its root with an
// entry budget.
type walker struct {
	s       *Server
	a       *area
	ctx     context.Context
	exclude []*glob
	budget  int   // entries left
	work    int64 // pattern-matching work left
}

// maxMatchWork bounds the glob matching one walk may do (in DP cells).
const maxMatchWork = 20_000_000

func newWalker(ctx context.Context, s *Server, a *area, exclude []*glob) *walker {
	return &walker{s: s, a: a, ctx: ctx, exclude: exclude, budget: s.maxEnt, work: maxMatchWork}
}

// charge accounts for matching g against rel.
func (w *walker) charge(g *glob, rel string) error {
	w.work -= g.cost(strings.Count(rel, "/") + 1)
	if w.work < 0 {
		return &toolError{msg: "the patterns are too expensive for this tree; simplify them or narrow the path"}
	}
	return nil
}

// excluded applies the exclude patterns to a path relative to the walk's
// start: a pattern with a wildcard must match the path; a plain name also
// matches that name (or path) at any depth and everything beneath it.
func (w *walker) excluded(rel string) (bool, error) {
	for _, g := range w.exclude {
		if err := w.charge(g, rel); err != nil {
			return false, err
		}
		if g.matchExclude(rel) {
			return true, nil
		}
	}
	return false, nil
}

// list reads one directory and charges its entries to the budget.
func (w *walker) list(dirRel string, depth int) ([]fs.DirEntry, error) {
	if err := w.ctx.Err(); err != nil {
		return nil, err
	}
	if depth > maxTreeDepth {
		return nil, &toolError{msg: fmt.Sprintf("directory tree is deeper than %d levels", maxTreeDepth)}
	}
	entries, err := w.s.readDir(loc{a: w.a, rel: dirRel})
	if err != nil {
		return nil, err
	}
	w.budget -= len(entries)
	if w.budget < 0 {
		return nil, &toolError{msg: fmt.Sprintf("more than %d entries; narrow the path or use excludePatterns", w.s.maxEnt)}
	}
	return entries, nil
}

// directoryTree returns the recursive JSON tree under path.
func (s *Server) directoryTree(ctx context.Context, a *toolargs.Args) (servers.Result, error) {
	l, err := s.resolveRead(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	ex, err := compileGlobs(a.Strings("excludePatterns"))
	if err != nil {
		return servers.Result{}, err
	}
	w := newWalker(ctx, s, l.a, ex)
	tree, err := w.tree(l.rel, "", 0)
	if err != nil {
		return servers.Result{}, failf("building directory tree", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(tree); err != nil {
		return servers.Result{}, fmt.Errorf("encoding directory tree: %w", err)
	}
	return servers.Text(strings.TrimSuffix(buf.String(), "\n")), nil
}

func (w *walker) tree(dirRel, prefix string, depth int) ([]treeEntry, error) {
	entries, err := w.list(dirRel, depth)
	if err != nil {
		return nil, err
	}
	out := make([]treeEntry, 0, len(entries))
	for _, e := range entries {
		rel := path.Join(prefix, e.Name())
		if skip, err := w.excluded(rel); err != nil {
			return nil, err
		} else if skip {
			continue
		}
		te := treeEntry{Name: e.Name(), Type: "file"}
		if e.IsDir() {
			te.Type = "directory"
			kids, err := w.tree(path.Join(dirRel, e.Name()), rel, depth+1)
			if err != nil {
				return nil, err
			}
			te.Children = &kids
		}
		out = append(out, te)
	}
	return out, nil
}

// searchFiles returns the absolute paths under path whose path relative to
// it matches the glob pattern (dot files included). Symlinks are never
// followed.
func (s *Server) searchFiles(ctx context.Context, a *toolargs.Args) (servers.Result, error) {
	l, err := s.resolveRead(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	pats, err := compileGlobs([]string{a.Str("pattern")})
	if err != nil {
		return servers.Result{}, err
	}
	ex, err := compileGlobs(a.Strings("excludePatterns"))
	if err != nil {
		return servers.Result{}, err
	}
	w := newWalker(ctx, s, l.a, ex)
	var found []string
	if err := w.search(l.rel, "", 0, pats[0], &found); err != nil {
		return servers.Result{}, failf("searching files", err)
	}
	if len(found) == 0 {
		return servers.Text("No matches found"), nil
	}
	return servers.Text(strings.Join(found, "\n")), nil
}

func (w *walker) search(dirRel, prefix string, depth int, g *glob, found *[]string) error {
	entries, err := w.list(dirRel, depth)
	if err != nil {
		return err
	}
	for _, e := range entries {
		rel := path.Join(prefix, e.Name())
		if skip, err := w.excluded(rel); err != nil {
			return err
		} else if skip {
			continue
		}
		full := path.Join(dirRel, e.Name())
		if err := w.charge(g, rel); err != nil {
			return err
		}
		if g.match(rel) {
			*found = append(*found, safeName(loc{a: w.a, rel: full}.display()))
		}
		if e.IsDir() {
			if err := w.search(full, rel, depth+1, g, found); err != nil {
				return err
			}
		}
	}
	return nil
}

// getFileInfo prints metadata of a file or directory (the path itself: a
// symlink swapped in is refused, not followed).
func (s *Server) getFileInfo(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	l, err := s.resolveRead(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	fi, err := l.a.root.Lstat(l.rel)
	if err != nil {
		return servers.Result{}, failf("reading file info", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return servers.Result{}, &toolError{msg: "access denied: path is a symbolic link", err: errSymlink}
	}
	var born time.Time
	if fi.Mode().IsRegular() || fi.IsDir() {
		kind := wantRegular
		if fi.IsDir() {
			kind = wantDir
		}
		f, checked, err := l.a.openChecked(l.rel, kind)
		if err != nil {
			return servers.Result{}, failf("reading file info", err)
		}
		fi = checked
		born = birthTime(f)
		f.Close()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "size: %d\n", fi.Size())
	if !born.IsZero() {
		fmt.Fprintf(&sb, "created: %s\n", born.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&sb, "modified: %s\n", fi.ModTime().UTC().Format(time.RFC3339))
	if at := accessTime(fi); !at.IsZero() {
		fmt.Fprintf(&sb, "accessed: %s\n", at.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&sb, "isDirectory: %t\nisFile: %t\npermissions: %03o", fi.IsDir(), fi.Mode().IsRegular(), fi.Mode().Perm())
	return servers.Text(sb.String()), nil
}

// listAllowedDirectories names the sandbox and the read-only directories.
func (s *Server) listAllowedDirectories(context.Context, *toolargs.Args) (servers.Result, error) {
	text := "Allowed directories:\n" + s.rootPath
	for _, a := range s.ro {
		text += "\n" + a.path + " (read-only)"
	}
	return servers.Text(text), nil
}
