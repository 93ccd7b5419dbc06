package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

const toolsPinUsage = `usage: ironcurtain tools pin [--config gateway.yaml] [--server NAME] [--check | --yes]

Starts each external server of gateway.yaml, lists its tools and compares
each definition (name, description, input schema) with the pin kept with its
annotation in tool-annotations.json. Shows what changed, then asks whether to
pin the new definitions (--yes: without asking; --check: never write, exit 1
when anything differs). The gateway hides and refuses a tool whose definition
differs from its pin; after pinning, reload the policy (SIGHUP or
POST /v1/policy/reload) or restart the gateway.
`

// ToolLister lists the tools of one external server (Wiring.ListExternal).
type ToolLister func(ctx context.Context, name string, sc config.ServerConfig, cfg *config.Config, getenv func(string) string) ([]servers.Tool, error)

func toolsPin(ctx context.Context, e Env, list ToolLister) int {
	fs := flag.NewFlagSet("tools pin", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() { fmt.Fprint(e.Stderr, toolsPinUsage) }
	cfgPath := fs.String("config", DefaultConfigPath, "gateway.yaml")
	var only multiFlag
	fs.Var(&only, "server", "only this external server (repeatable)")
	yes := fs.Bool("yes", false, "pin the new definitions without asking")
	check := fs.Bool("check", false, "only compare: exit 1 when a definition differs from its pin, write nothing")
	if err := fs.Parse(e.Args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || (*yes && *check) {
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(e.Stderr, "ironcurtain tools pin: %v\n", err)
		return 1
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return fail(err)
	}
	files, err := loadAnnotationFiles(cfg)
	if err != nil {
		return fail(err)
	}
	if len(files) == 0 {
		return fail(errors.New("no tool-annotations.json: set policy_dir or annotations_file, and annotate the external servers first (compiler annotate-tools)"))
	}
	names := cfg.ExternalServers()
	if len(only) > 0 {
		for _, n := range only {
			if _, ok := cfg.Servers[n]; !ok || !cfg.Servers[n].External() {
				return fail(fmt.Errorf("--server %s: no external server of that name in %s", n, *cfgPath))
			}
		}
		names = only
	}
	if len(names) == 0 {
		fmt.Fprintln(e.Stdout, "no external servers are configured; built-in tools are pinned by the binary")
		return 0
	}
	listed := map[string][]servers.Tool{}
	for _, n := range names {
		tools, err := list(ctx, n, cfg.Servers[n], cfg, e.Getenv)
		if err != nil {
			return fail(fmt.Errorf("listing the tools of %s: %w", n, err))
		}
		listed[n] = tools
	}
	seeded := seedCatalog(files, cfg, names) // tools_pin_catalog.go
	changes, notes := comparePins(files, listed)
	for _, n := range notes {
		fmt.Fprintln(e.Stdout, n)
	}
	if len(changes) == 0 {
		fmt.Fprintf(e.Stdout, "every annotated tool of %s matches its pin\n", strings.Join(names, ", "))
		return 0
	}
	for _, c := range changes {
		c.print(e.Stdout)
	}
	if *check {
		fmt.Fprintf(e.Stdout, "%d tool definition(s) differ from their pins\n", len(changes))
		return 1
	}
	var paths []string
	changed := map[string]bool{}
	for _, c := range changes {
		if !changed[c.file.path] {
			changed[c.file.path] = true
			paths = append(paths, c.file.path)
		}
	}
	if !*yes {
		fmt.Fprintf(e.Stdout, "Pin these %d definition(s) in %s? [y/N] ", len(changes), strings.Join(paths, " and "))
		line, _ := bufio.NewReader(e.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(e.Stdout, "nothing pinned")
			return 1
		}
	}
	for _, c := range changes {
		c.apply()
	}
	pruneSeeded(files[0].ann, seeded, changes)
	for _, f := range files {
		if !changed[f.path] {
			continue
		}
		out, err := json.MarshalIndent(f.ann, "", "  ")
		if err != nil {
			return fail(err)
		}
		if err := replaceFile(f.path, append(out, '\n')); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(e.Stdout, "pinned %d tool(s) in %s; reload the policy (SIGHUP or POST /v1/policy/reload) or restart the gateway\n", len(changes), strings.Join(paths, " and "))
	return 0
}

// annotationFile is one tool annotation file the gateway loads.
type annotationFile struct {
	path string
	ann  *policy.Annotations
}

// loadAnnotationFiles reads the annotation files the gateway loads (the
// policy directory's tool-annotations.json, then annotations_file) and
// refuses a tool annotated in both, as the gateway does.
func loadAnnotationFiles(cfg *config.Config) ([]*annotationFile, error) {
	var out []*annotationFile
	var srcs []policy.AnnotationSource
	for _, p := range annotationPaths(cfg) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading the annotations: %w", err)
		}
		ann, err := policy.ParseAnnotations(p, b)
		if err != nil {
			return nil, err
		}
		out = append(out, &annotationFile{path: p, ann: ann})
		srcs = append(srcs, policy.AnnotationSource{File: p, Annotations: ann})
	}
	// A tool of an external server annotated in both files stops the
	// gateway too; the built-in servers' file entries are overridden by
	// the annotations declared in their code.
	external := map[string]bool{}
	for _, n := range cfg.ExternalServers() {
		external[n] = true
	}
	if _, err := policy.MergeAnnotationsExcept(func(server, _ string) bool { return !external[server] }, srcs...); err != nil {
		return nil, err
	}
	return out, nil
}

// pinChange is one annotated tool whose listed definition differs from its
// pin.
type pinChange struct {
	file   *annotationFile
	server string
	ann    *policy.ToolAnnotation
	def    policy.ToolDefinition
	check  policy.PinCheck
	schema json.RawMessage // canonical listed schema
	pin    policy.ToolPin
	// uncovered are schema properties the annotation has no role for.
	uncovered []string
}

func (c *pinChange) print(w io.Writer) {
	fmt.Fprintf(w, "%s__%s: %s\n", c.server, c.def.Name, strings.Join(c.check.Changed, ", "))
	old := ""
	if c.ann.Pin != nil {
		old = c.ann.Pin.Description
	}
	if old != c.def.Description {
		fmt.Fprintln(w, "  description:")
		fmt.Fprintf(w, "  - %s\n", visible(old))
		fmt.Fprintf(w, "  + %s\n", visible(c.def.Description))
	}
	was, _ := policy.CanonicalSchema(c.ann.InputSchema)
	if !bytes.Equal(was, c.schema) {
		fmt.Fprintln(w, "  input schema:")
		fmt.Fprintf(w, "  - %s\n", visible(string(was)))
		fmt.Fprintf(w, "  + %s\n", visible(string(c.schema)))
	}
	if len(c.uncovered) > 0 {
		fmt.Fprintf(w, "  warning: the annotation has no role for %s; calls using them are refused until the compiler's annotate-tools annotates them\n", strings.Join(c.uncovered, ", "))
	}
}

func (c *pinChange) apply() {
	c.ann.InputSchema = c.schema
	p := c.pin
	c.ann.Pin = &p
}

// comparePins compares each annotated tool of the listed servers with its
// pin; notes are the tools that cannot be pinned (no annotation) or are no
// longer listed.
func comparePins(files []*annotationFile, listed map[string][]servers.Tool) ([]*pinChange, []string) {
	var changes []*pinChange
	var notes []string
	srvNames := make([]string, 0, len(listed))
	for n := range listed {
		srvNames = append(srvNames, n)
	}
	sort.Strings(srvNames)
	for _, srv := range srvNames {
		byName := map[string]*policy.ToolAnnotation{}
		fileOf := map[string]*annotationFile{}
		for _, f := range files {
			sa := f.ann.Servers[srv]
			if sa == nil {
				continue
			}
			for i := range sa.Tools {
				byName[sa.Tools[i].Tool] = &sa.Tools[i]
				fileOf[sa.Tools[i].Tool] = f
			}
		}
		seen := map[string]bool{}
		tools := append([]servers.Tool(nil), listed[srv]...)
		sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
		for _, t := range tools {
			seen[t.Name] = true
			a := byName[t.Name]
			if a == nil {
				notes = append(notes, fmt.Sprintf("%s__%s: no annotation; not exposed (annotate it with the compiler's annotate-tools, then pin it)", srv, t.Name))
				continue
			}
			def := policy.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
			chk := policy.CheckPin(*a, def)
			if chk.OK {
				continue
			}
			schema, err := policy.CanonicalSchema(t.InputSchema)
			if err != nil {
				notes = append(notes, fmt.Sprintf("%s__%s: the server lists a schema that is not JSON; cannot pin it (%v)", srv, t.Name, err))
				continue
			}
			pin, err := def.Pin()
			if err != nil {
				notes = append(notes, fmt.Sprintf("%s__%s: cannot pin: %v", srv, t.Name, err))
				continue
			}
			changes = append(changes, &pinChange{file: fileOf[t.Name], server: srv, ann: a, def: def, check: chk, schema: schema, pin: pin, uncovered: uncovered(*a, schema)})
		}
		names := make([]string, 0, len(byName))
		for n := range byName {
			if !seen[n] {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			notes = append(notes, fmt.Sprintf("%s__%s: annotated but no longer listed by the server", srv, n))
		}
	}
	return changes, notes
}

// uncovered returns the schema's properties the annotation has no role for.
func uncovered(a policy.ToolAnnotation, schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []string
	for p := range s.Properties {
		if _, ok := a.Arg(p); !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// visible shows control, format and invisible characters as escapes, so a
// description cannot hide text from the reviewer.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xad || (r >= 0x200b && r <= 0x200f) ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2060 && r <= 0x206f) || r == 0xfeff || (r >= 0xe0000 && r <= 0xe007f):
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// annotationPaths are the tool annotation files the gateway loads: the
// policy directory's tool-annotations.json when it exists, then
// annotations_file (policy.LoadDir).
func annotationPaths(cfg *config.Config) []string {
	var out []string
	if cfg.PolicyDir != "" {
		p := filepath.Join(cfg.PolicyDir, policy.AnnotationsFile)
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	if f := cfg.AnnotationsFile; f != "" && (len(out) == 0 || filepath.Clean(f) != out[0]) {
		out = append(out, f)
	}
	return out
}

// replaceFile writes path atomically (temporary file, rename), keeping its
// mode.
func replaceFile(path string, b []byte) error {
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tool-annotations-*.json")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), mode)); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
