package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadDir reads compiled-policy.json, dynamic-lists.json (optional) and the
// tool annotations (dir's tool-annotations.json and s.AnnotationsFile, both
// when both exist, merged by MergeAnnotations: a tool in both is an error
// naming both files; plus the annotations declared in s) and builds the
// engine. A set s.AnnotationsFile that cannot be read is an error. When s.ShadowPolicyDir
// is set, that directory is loaded the same way and attached as a
// report-only shadow. The policy directories and the annotations file are
// added to the protected paths.
//
// The rules are rebased from the sandbox the policy was compiled for (its
// "sandbox" field, else DefaultCompiledSandbox) to s.Sandbox: see
// Engine.Rebase, which the caller logs.
func LoadDir(dir string, s Settings, opts ...Option) (*Engine, error) {
	return loadDirEnv(dir, s, newEnv(osFS{}, opts))
}

func loadDirEnv(dir string, s Settings, env env) (*Engine, error) {
	e, err := loadDir(dir, s, env)
	if err != nil {
		return nil, err
	}
	if s.ShadowPolicyDir != "" {
		shadow, err := loadDir(s.ShadowPolicyDir, s, env)
		if err != nil {
			return nil, fmt.Errorf("loading shadow policy: %w", err)
		}
		e.shadow = shadow
		e.version = e.versionWithShadow()
	}
	return e, nil
}

func loadDir(dir string, s Settings, env env) (*Engine, error) {
	read := func(name string, optional bool) ([]byte, string, error) {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			if optional && errors.Is(err, os.ErrNotExist) {
				return nil, path, nil
			}
			return nil, path, fmt.Errorf("loading policy: %w", err)
		}
		return b, path, nil
	}
	b, path, err := read(CompiledPolicyFile, false)
	if err != nil {
		return nil, err
	}
	pol, err := ParseCompiledPolicy(path, b)
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	pol, rebase, err := rebaseToSettings(pol, s, path)
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	var lists *DynamicLists
	if b, path, err = read(DynamicListsFile, true); err != nil {
		return nil, err
	} else if b != nil {
		if lists, err = ParseDynamicLists(path, b); err != nil {
			return nil, fmt.Errorf("loading policy: %w", err)
		}
	}
	// Both annotation files load: the policy directory's and annotations_file
	// (an external server's tools are typically in the latter). A tool in
	// both is an error naming both (MergeAnnotations).
	var anns []AnnotationSource
	b, path, err = read(AnnotationsFile, true)
	if err != nil {
		return nil, err
	}
	if b != nil {
		a, err := ParseAnnotations(path, b)
		if err != nil {
			return nil, fmt.Errorf("loading tool annotations: %w", err)
		}
		anns = append(anns, AnnotationSource{File: path, Annotations: a})
	}
	if f := s.AnnotationsFile; f != "" && (b == nil || !samePath(f, path)) {
		fb, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("loading tool annotations (annotations_file): %w", err)
		}
		a, err := ParseAnnotations(f, fb)
		if err != nil {
			return nil, fmt.Errorf("loading tool annotations: %w", err)
		}
		anns = append(anns, AnnotationSource{File: f, Annotations: a})
	}
	s.ProtectedPaths = append([]string(nil), s.ProtectedPaths...)
	for _, p := range []string{dir, s.AnnotationsFile, s.ShadowPolicyDir} {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("loading policy: %w", err)
		}
		s.ProtectedPaths = append(s.ProtectedPaths, abs)
	}
	e, err := newEngine(pol, anns, lists, s, fileNames{
		policy: filepath.Join(dir, CompiledPolicyFile), lists: filepath.Join(dir, DynamicListsFile),
	}, env)
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	e.rebase = rebase
	return e, nil
}

type fileNames struct{ policy, lists string }

// New builds an engine from parsed artifacts. a and l may be nil. Errors
// name the artifact and the JSON path, or the settings field.
func New(p *CompiledPolicy, a *Annotations, l *DynamicLists, s Settings, opts ...Option) (*Engine, error) {
	return newEngine(p, []AnnotationSource{{File: AnnotationsFile, Annotations: a}}, l, s, fileNames{policy: CompiledPolicyFile, lists: DynamicListsFile}, newEnv(osFS{}, opts))
}

func newEngine(p *CompiledPolicy, anns []AnnotationSource, l *DynamicLists, s Settings, files fileNames, env env) (*Engine, error) {
	if p == nil {
		return nil, &FileError{File: files.policy, Err: errors.New("missing compiled policy")}
	}
	e := &Engine{tools: map[string]*tool{}, trusted: map[string]bool{}, allow: map[string]domainSet{}, fs: env.fs, remotes: env.remotes}
	if err := e.compileSettings(s); err != nil {
		return nil, err
	}
	declared := map[string]bool{}
	for _, t := range s.Annotations {
		declared[t.Server+"__"+t.Tool] = true
	}
	a, err := MergeAnnotationsExcept(func(server, tool string) bool { return declared[server+"__"+tool] }, anns...)
	if err != nil {
		return nil, err
	}
	if err := e.compileSessionRoot(s); err != nil { // sessions.go
		return nil, err
	}
	e.src, e.views = &engineSource{pol: p, anns: anns, lists: l, files: files}, newViewCache()
	if err := e.compileAnnotations(anns, s.Annotations); err != nil {
		return nil, err
	}
	if err := e.addCatalogAnnotations(s.CatalogAnnotations); err != nil {
		return nil, err
	}
	if err := e.compileRules(p, l, files); err != nil {
		return nil, err
	}
	for _, src := range anns {
		if src.Annotations != nil {
			e.annFiles = append(e.annFiles, src.File)
		}
	}
	e.checkReach()
	e.content = contentVersion(p, a, l, s)
	e.version = e.content
	return e, nil
}

func settingsErr(field string, err error) error {
	return fileErr("settings", field, err)
}

func (e *Engine) compileSettings(s Settings) error {
	home := s.home()
	e.canon = pathCanon{home: home, fs: e.fs}
	if s.Sandbox != "" {
		lex, err := cleanAbs(s.Sandbox, home)
		if err != nil {
			return settingsErr("sandbox", err)
		}
		real, err := e.canon.canonical(lex)
		if err != nil {
			return settingsErr("sandbox", err)
		}
		e.canon.sandbox, e.canon.sandboxLex = real, lex
	}
	if err := e.compileReach(s); err != nil {
		return err
	}
	for i, pp := range s.ProtectedPaths {
		lex, err := cleanAbs(pp, home)
		if err != nil {
			return settingsErr(fmt.Sprintf("protected_paths[%d]", i), err)
		}
		real, err := e.canon.canonical(lex)
		if err != nil {
			return settingsErr(fmt.Sprintf("protected_paths[%d]", i), err)
		}
		for _, p := range []string{real, lex} {
			if !contains(e.protect, p) {
				e.protect = append(e.protect, p)
			}
		}
	}
	safe, err := validateSandboxSafeRoles(s.sandboxSafeRoles())
	if err != nil {
		return err
	}
	e.safe = safe
	if s.SandboxSafeRoles != nil {
		s.SandboxSafeRoles = append([]Role{}, s.SandboxSafeRoles...)
	}
	for _, r := range s.SandboxSafeRoles {
		if !roleDef(r).SandboxSafe {
			e.warnings = append(e.warnings, fmt.Sprintf("settings: sandbox_safe_roles lists %s: such calls inside the sandbox are allowed without consulting the compiled rules", r))
		}
	}
	for _, t := range s.TrustedServers {
		e.trusted[t] = true
	}
	for _, server := range sortedKeys(s.DomainAllowlists) {
		ps, err := parseDomainPatterns(s.DomainAllowlists[server])
		if err != nil {
			return settingsErr("domain_allowlists."+server, err)
		}
		set, err := newDomainSet(ps)
		if err != nil {
			return settingsErr("domain_allowlists."+server, err)
		}
		e.allow[server] = set
	}
	pc, err := NewPushChecker(e.canon.sandbox, s.ProtectedBranches, e.remotes)
	if err != nil {
		return settingsErr("", err)
	}
	e.push = pc
	sc, err := NewSecretScanner(s.Secrets)
	if err != nil {
		return settingsErr("secrets", err)
	}
	e.secrets = sc
	e.settings = s
	return nil
}

func (e *Engine) compileAnnotations(anns []AnnotationSource, declared []ToolAnnotation) error {
	declaredKeys := map[string]bool{}
	for i, t := range declared {
		path := fmt.Sprintf("annotations[%d]", i)
		if t.Server == "" {
			return settingsErr(path+".serverName", errors.New("missing"))
		}
		if err := e.addTool(t.Server, t); err != nil {
			return settingsErr(path, err)
		}
		declaredKeys[t.Server+"__"+t.Tool] = true
	}
	for _, src := range anns {
		a, file := src.Annotations, src.File
		if a == nil {
			continue
		}
		for _, server := range sortedKeys(a.Servers) {
			if server == "" || strings.Contains(server, "__") {
				return &FileError{File: file, Path: "servers", Err: fmt.Errorf("invalid server name %q", server)}
			}
			sa := a.Servers[server]
			if sa == nil {
				continue
			}
			for i, t := range sa.Tools {
				if declaredKeys[server+"__"+t.Tool] {
					continue
				}
				if err := e.addTool(server, t); err != nil {
					return fileErr(file, fmt.Sprintf("servers.%s.tools[%d]", server, i), err)
				}
			}
		}
	}
	return nil
}

// addCatalogAnnotations registers the catalog's annotations of the tools
// neither the code nor the annotations file annotates: an operator's own
// entry (re-pinned with `ironcurtain tools pin`) wins over the catalog's.
func (e *Engine) addCatalogAnnotations(cat []ToolAnnotation) error {
	for i, t := range cat {
		path := fmt.Sprintf("catalog_annotations[%d]", i)
		if t.Server == "" || strings.Contains(t.Server, "__") {
			return settingsErr(path+".serverName", fmt.Errorf("invalid server name %q", t.Server))
		}
		if _, ok := e.tools[t.Server+"__"+t.Tool]; ok {
			continue
		}
		if err := e.addTool(t.Server, t); err != nil {
			return settingsErr(path, err)
		}
	}
	return nil
}

// addTool validates an annotation and registers it under server.
func (e *Engine) addTool(server string, t ToolAnnotation) error {
	if t.Tool == "" {
		return &FileError{Path: "toolName", Err: errors.New("missing")}
	}
	key := server + "__" + t.Tool
	if _, dup := e.tools[key]; dup {
		return &FileError{Path: "toolName", Err: fmt.Errorf("duplicate tool %q", t.Tool)}
	}
	tl := &tool{server: server, name: t.Tool, ann: t, index: make(map[string]int, len(t.Args)), prMerge: isPRMerge(t.Tool),
		textServer: e.secrets != nil && e.secrets.textServers[server]}
	tl.ann.Server = server
	for i, arg := range t.Args {
		if _, dup := tl.index[arg.Name]; dup {
			return &FileError{Path: "args." + arg.Name, Err: errors.New("duplicate argument")}
		}
		tl.index[arg.Name] = i
	}
	for _, arg := range t.Args {
		path := "args." + arg.Name
		if err := checkRoles(arg.Spec.Default); err != nil {
			return &FileError{Path: path, Err: err}
		}
		for j, w := range arg.Spec.When {
			wp := fmt.Sprintf("%s.when[%d]", path, j)
			if err := checkRoles(w.Roles); err != nil {
				return &FileError{Path: wp + ".roles", Err: err}
			}
			if _, ok := tl.index[w.Condition.Arg]; !ok {
				return &FileError{Path: wp + ".condition.arg", Err: fmt.Errorf("no argument %q", w.Condition.Arg)}
			}
			if w.Condition.Equals == nil && w.Condition.In == nil && w.Condition.Is == "" {
				return &FileError{Path: wp + ".condition", Err: errors.New("one of equals, in and is must be set")}
			}
			tl.conditional = true
		}
	}
	if !tl.conditional {
		rr := tl.resolve(nil)
		tl.static = &rr
	}
	e.tools[key] = tl
	if e.byName == nil {
		e.byName = map[toolName]*tool{}
	}
	e.byName[toolName{server, t.Tool}] = tl
	return nil
}

// checkRoles requires a non-empty list of registered roles that does not
// mix path and URL roles (the value could not be canonicalised as both).
func checkRoles(rs []Role) error {
	if len(rs) == 0 {
		return errors.New("must list at least one role")
	}
	var cats []Category
	for _, r := range rs {
		d := roleDef(r)
		if d == nil {
			return fmt.Errorf("unknown role %q", r)
		}
		if d.Category == CategoryPath || d.Category == CategoryURL {
			if !contains(cats, d.Category) {
				cats = append(cats, d.Category)
			}
		}
	}
	if len(cats) > 1 {
		return errors.New("an argument cannot carry both path and URL roles")
	}
	return nil
}
