// Package config loads gateway.yaml, the gateway's deployment settings.
// It is the one mapping from gateway.yaml to every component's settings, and
// public: the policy compiler reads gateway.yaml through it too, so it never
// works from a file `ironcurtain serve` would refuse, and it verifies under
// the policy settings the gateway enforces (Config.PolicySettings).
//
// Parsing is strict: an unknown key anywhere is an error naming the file, the
// key path and the line; every validation error names the file and the field
// (for example `gateway.yaml: servers.git.allowed_domains[2]: "*.": ...`).
// Relative paths are resolved against the directory of the file, and a
// leading ~ expands from $HOME. Defaults are the named constants below.
//
// Each component owns one section: one field on Config plus a section type
// in its own file (config/<section>.go). A section type may implement
// Validator; its errors are reported under the section's key.
package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"ironcurtain.dev/gateway/policy"
)

// Defaults applied by Load when a field is absent. protected_branches,
// absent or empty, defaults to policy.DefaultProtectedBranches().
const (
	// DefaultSandbox is the policy package's DefaultCompiledSandbox: a
	// policy that does not record its sandbox was compiled for this one.
	DefaultSandbox   = policy.DefaultCompiledSandbox
	DefaultPolicyDir = "/etc/ironcurtain/policy"
)

// Config is gateway.yaml.
type Config struct {
	// Sandbox is the agent's workspace as the gateway sees it.
	Sandbox string `yaml:"sandbox"`
	// ProtectedPaths can never be reached through a tool.
	ProtectedPaths []string `yaml:"protected_paths"`
	// ProtectedBranches can never be pushed to (names or one-'*' globs).
	ProtectedBranches []string `yaml:"protected_branches"`
	// TrustedServers skip policy evaluation (git push and PR-merge
	// invariants still apply).
	TrustedServers []string `yaml:"trusted_servers"`
	// SandboxSafeRoles are the path roles allowed inside the sandbox
	// without consulting the compiled rules. Absent (or null):
	// policy.DefaultSandboxSafeRoles, read-path and write-path; [] resolves
	// nothing. Listing delete-path, write-history or delete-history (the
	// original IronCurtain's behaviour) lets deletes and history rewrites in
	// the sandbox skip the rules.
	SandboxSafeRoles []policy.Role `yaml:"sandbox_safe_roles"`
	// PolicyDir holds compiled-policy.json, dynamic-lists.json and
	// optionally tool-annotations.json.
	PolicyDir string `yaml:"policy_dir"`
	// ShadowPolicyDir, when set, is evaluated report-only next to PolicyDir.
	ShadowPolicyDir string `yaml:"shadow_policy_dir"`
	// AnnotationsFile is loaded together with PolicyDir's
	// tool-annotations.json (a tool annotated in both is an error naming
	// both files).
	AnnotationsFile string `yaml:"annotations_file"`
	// Servers holds per-server settings keyed by server name.
	Servers map[string]ServerConfig `yaml:"servers"`
	// Egress is the agent's HTTP(S) proxy (egress.go).
	Egress EgressConfig `yaml:"egress"`
	// Audit tunes the audit sinks (audit.go).
	Audit AuditConfig `yaml:"audit"`
	// Escalation configures human approvals (escalation.go).
	Escalation EscalationConfig `yaml:"escalation"`
	// Ops is the operator API (ops.go).
	Ops OpsConfig `yaml:"ops"`
	// Relay is the model relay on the agent port (relay.go).
	Relay RelayConfig `yaml:"relay"`
	// MCP tunes the agent's MCP endpoint and call pipeline (mcp.go).
	MCP MCPConfig `yaml:"mcp"`
	// GitHub configures the built-in github server (github.go).
	GitHub GitHubConfig `yaml:"github"`
	// Fetch tunes the built-in fetch server (fetch.go); its allowlist is
	// servers.fetch.allowed_domains.
	Fetch FetchConfig `yaml:"fetch"`
	// Agent is the agent-facing API and its sessions (agent.go).
	Agent AgentConfig `yaml:"agent"`
	// Git configures the built-in git server's mirror and credentials (git.go).
	Git GitConfig `yaml:"git"`
	// Database says where the Postgres DSN comes from (database.go).
	Database DatabaseConfig `yaml:"database"`
	// LoopBreaker limits each agent session's calls (loopbreaker.go).
	LoopBreaker LoopBreakerConfig `yaml:"loop_breaker"`
	// Secrets configures outbound secret scanning (secrets.go).
	Secrets SecretsConfig `yaml:"secrets"`
	// Launcher is how the gateway reaches the container launcher of image:
	// servers (launcher.go).
	Launcher LauncherConfig `yaml:"launcher"`
	// SessionWorkspaces gives each minted session its own sandbox
	// (workspaces.go).
	SessionWorkspaces SessionWorkspacesConfig `yaml:"session_workspaces"`

	// file is the path the configuration was loaded from.
	file string
}

// ServerConfig is the per-server section. External MCP servers add their
// launch settings here.
type ServerConfig struct {
	// AllowedDomains are the domains the server's URL arguments may name
	// without a human approving: "host", "*.suffix", "*", "host/owner/repo".
	AllowedDomains []string `yaml:"allowed_domains"`
	// Command, Args and Env launch an external stdio MCP server under this
	// name (servers.go); built-in servers leave them empty.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	// Image runs the external server in its own container, started by the
	// launcher (launcher.go); exclusive with Command and URL.
	Image string `yaml:"image"`
	// Egress is an image server's own egress allowlist (servers.go).
	Egress ServerEgress `yaml:"egress"`
	// URL, Headers, BearerTokenFile and AllowedHosts reach a remote or
	// sidecar MCP server over streamable HTTP instead (remote.go).
	URL             string            `yaml:"url"`
	Headers         map[string]string `yaml:"headers"`
	BearerTokenFile string            `yaml:"bearer_token_file"`
	AllowedHosts    []string          `yaml:"allowed_hosts"`
	// UnsafeAllowAddresses lets this url: server's dials reach these
	// private prefixes (a sidecar on loopback, an in-cluster Service); the
	// agent's egress proxy is not affected.
	UnsafeAllowAddresses []string `yaml:"unsafe_allow_addresses"`
	// Catalog ("name@version") takes the server's reviewed annotations and
	// pins from the shipped catalog (gateway/catalog; remote.go).
	Catalog string `yaml:"catalog"`
	// ReadOnlyDirs (filesystem only) are directories outside the sandbox
	// that the filesystem server's read tools may read and its write tools
	// never touch; the policy engine resolves reads there like reads in
	// the sandbox. Relative paths resolve against the file's directory.
	ReadOnlyDirs []string `yaml:"read_only_dirs"`
}

// Validator is implemented by section types that check themselves. Errors
// should be FieldErrors with Field relative to the section.
type Validator interface {
	Validate() error
}

// FieldError names the field a validation error is about.
type FieldError struct {
	File  string
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Errorf returns a FieldError for field; sections use it in Validate.
func Errorf(field, format string, a ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// File returns the path the configuration was loaded from ("" when parsed
// from memory without a name).
func (c *Config) File() string { return c.file }

// Load reads, parses, applies defaults to and validates the file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading config: %w", err)
	}
	c, err := Parse(path, b)
	if err != nil {
		return nil, fmt.Errorf("loading config: %w", err)
	}
	return c, nil
}

// Parse parses data (named file in errors), resolves relative paths against
// the directory of file, applies defaults and validates.
func Parse(file string, data []byte) (*Config, error) {
	name := filepath.Base(file)
	if file == "" {
		name = "gateway.yaml"
	}
	root, err := oneDocument(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &Config{file: file}
	if len(root.Content) > 0 {
		doc := root.Content[0]
		if err := checkKnown(doc, reflect.TypeOf(c).Elem(), ""); err != nil {
			return nil, prefixFile(name, err)
		}
		if err := doc.Decode(c); err != nil {
			return nil, fmt.Errorf("%s: %w", name, cleanYAMLErr(err))
		}
	}
	c.file = file
	if err := c.resolvePaths(filepath.Dir(file)); err != nil {
		return nil, prefixFile(name, err)
	}
	c.applyDefaults()
	if err := c.validate(name); err != nil {
		return nil, err
	}
	return c, nil
}

// oneDocument parses data as at most one YAML document. A second document
// ("---" and more) is refused: yaml.Unmarshal would read the first and
// drop the rest unread, so a reviewer and the gateway could read different
// settings in one file. (Duplicate keys are refused by yaml.v3 when the
// tree is decoded; unknown and case-variant keys by checkKnown.)
func oneDocument(data []byte) (yaml.Node, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return yaml.Node{}, cleanYAMLErr(err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return yaml.Node{}, errors.New("the file holds more than one YAML document (only one is read: remove the second \"---\" and what follows)")
	}
	return root, nil
}

func prefixFile(name string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) && fe.File == "" {
		fe.File = name
		return fe
	}
	return fmt.Errorf("%s: %w", name, err)
}

func cleanYAMLErr(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
	return errors.New(msg)
}

// checkKnown walks the YAML tree along the Go type and reports the first
// key that no field takes, with its path and line.
func checkKnown(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if decodesItself(t) {
		return nil // the type's own unmarshaller decides what it accepts
	}
	if n.Kind == yaml.AliasNode {
		return &FieldError{Field: path, Err: fmt.Errorf("line %d: YAML aliases are not allowed", n.Line)}
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil // Decode reports the type error
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fieldByTag(t, k.Value)
			p := join(path, k.Value)
			if !ok {
				return &FieldError{Field: p, Err: fmt.Errorf("unknown key (line %d)", k.Line)}
			}
			if err := checkKnown(v, f.Type, p); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKnown(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, v := range n.Content {
			if err := checkKnown(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

var (
	yamlUnmarshaler = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(yamlUnmarshaler) || p.Implements(yamlUnmarshaler) || t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			if inner, ok := fieldByTag(f.Type, key); ok {
				return inner, true
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// resolvePaths expands ~ and makes relative paths absolute against base.
func (c *Config) resolvePaths(base string) error {
	home := os.Getenv("HOME")
	fix := func(field string, p *string) error {
		if *p == "" {
			return nil
		}
		v := *p
		if v == "~" || strings.HasPrefix(v, "~/") {
			if home == "" {
				return &FieldError{Field: field, Err: errors.New("starts with ~ but $HOME is not set")}
			}
			v = home + v[1:]
		}
		if !filepath.IsAbs(v) {
			abs, err := filepath.Abs(filepath.Join(base, v))
			if err != nil {
				return &FieldError{Field: field, Err: err}
			}
			v = abs
		}
		*p = filepath.Clean(v)
		return nil
	}
	for _, f := range []struct {
		name string
		p    *string
	}{{"sandbox", &c.Sandbox}, {"policy_dir", &c.PolicyDir}, {"shadow_policy_dir", &c.ShadowPolicyDir}, {"annotations_file", &c.AnnotationsFile}} {
		if err := fix(f.name, f.p); err != nil {
			return err
		}
	}
	for i := range c.ProtectedPaths {
		if err := fix(fmt.Sprintf("protected_paths[%d]", i), &c.ProtectedPaths[i]); err != nil {
			return err
		}
	}
	for name, sc := range c.Servers {
		if len(sc.ReadOnlyDirs) == 0 {
			continue
		}
		sc.ReadOnlyDirs = append([]string(nil), sc.ReadOnlyDirs...)
		for i := range sc.ReadOnlyDirs {
			if err := fix(fmt.Sprintf("servers.%s.read_only_dirs[%d]", name, i), &sc.ReadOnlyDirs[i]); err != nil {
				return err
			}
		}
		c.Servers[name] = sc
	}
	return nil
}

func (c *Config) applyDefaults() {
	if c.Sandbox == "" {
		c.Sandbox = DefaultSandbox
	}
	if c.PolicyDir == "" {
		c.PolicyDir = DefaultPolicyDir
	}
	if len(c.ProtectedBranches) == 0 {
		c.ProtectedBranches = policy.DefaultProtectedBranches()
	}
	if c.SandboxSafeRoles == nil { // [] stays empty: nothing is resolved
		c.SandboxSafeRoles = policy.DefaultSandboxSafeRoles()
	}
}

// Validate checks every field and reports all problems at once.
func (c *Config) Validate() error { return c.validate(filepath.Base(c.file)) }

func (c *Config) validate(name string) error {
	if name == "" || name == "." {
		name = "gateway.yaml"
	}
	var errs []error
	add := func(field string, err error) {
		errs = append(errs, &FieldError{File: name, Field: field, Err: err})
	}
	if c.Sandbox == "/" {
		add("sandbox", errors.New("the sandbox cannot be the root directory"))
	}
	if err := workspaceOverlap(c.SessionWorkspaces.Root, c.Sandbox); err != nil {
		add("session_workspaces.root", err)
	}
	for i, p := range c.ProtectedPaths {
		if p == "" {
			add(fmt.Sprintf("protected_paths[%d]", i), errors.New("empty path"))
		}
	}
	for i, b := range c.ProtectedBranches {
		if err := policy.ValidateProtectedBranch(b); err != nil {
			add(fmt.Sprintf("protected_branches[%d]", i), err)
		}
	}
	for i, s := range c.TrustedServers {
		if s == "" {
			add(fmt.Sprintf("trusted_servers[%d]", i), errors.New("empty server name"))
		}
	}
	for i, r := range c.SandboxSafeRoles {
		field := fmt.Sprintf("sandbox_safe_roles[%d]", i)
		if err := policy.ValidateSandboxSafeRole(r); err != nil {
			add(field, err)
		} else if j := indexOf(c.SandboxSafeRoles[:i], r); j >= 0 {
			add(field, fmt.Errorf("duplicate role %q (also sandbox_safe_roles[%d])", r, j))
		}
	}
	if c.ShadowPolicyDir != "" && c.ShadowPolicyDir == c.PolicyDir {
		add("shadow_policy_dir", errors.New("is the same directory as policy_dir"))
	}
	for _, name := range sortedKeys(c.Servers) {
		field := "servers." + name
		if name == "" || strings.Contains(name, "__") {
			add(field, errors.New(`server names must be non-empty and must not contain "__"`))
		}
		for i, d := range c.Servers[name].AllowedDomains {
			if err := policy.ValidateDomainPattern(d); err != nil {
				add(fmt.Sprintf("%s.allowed_domains[%d]", field, i), err)
			}
		}
		for _, fe := range c.Servers[name].launchErrors(name) {
			add(subField(field, fe.Field), fe.Err)
		}
		for _, fe := range c.Servers[name].remoteErrors(name) {
			add(subField(field, fe.Field), fe.Err)
		}
		for _, fe := range c.readOnlyDirErrors(name) {
			add(subField(field, fe.Field), fe.Err)
		}
	}
	for _, fe := range c.imageErrors() {
		add(fe.Field, fe.Err)
	}
	for _, fe := range c.fetchAllowlistErrors() {
		add(fe.Field, fe.Err)
	}
	errs = append(errs, c.validateSections(name)...)
	return errors.Join(errs...)
}

// validateSections calls Validate on every section that implements
// Validator and prefixes its field errors with the section key.
func (c *Config) validateSections(name string) []error {
	var errs []error
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		val, ok := fv.Addr().Interface().(Validator)
		if !ok {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		err := val.Validate()
		if err == nil {
			continue
		}
		for _, e := range flatten(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				errs = append(errs, &FieldError{File: name, Field: join(key, fe.Field), Err: fe.Err})
			} else {
				errs = append(errs, &FieldError{File: name, Field: key, Err: e})
			}
		}
	}
	return errs
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// PolicySettings returns the policy engine's settings.
func (c *Config) PolicySettings() policy.Settings {
	s := policy.Settings{
		Sandbox:           c.Sandbox,
		ProtectedPaths:    append([]string(nil), c.ProtectedPaths...),
		ProtectedBranches: append([]string(nil), c.ProtectedBranches...),
		TrustedServers:    append([]string(nil), c.TrustedServers...),
		AnnotationsFile:   c.AnnotationsFile,
		SandboxSafeRoles:  copyRoles(c.SandboxSafeRoles),
		ShadowPolicyDir:   c.ShadowPolicyDir,
	}
	if c.file != "" {
		if abs, err := filepath.Abs(c.file); err == nil {
			s.ProtectedPaths = append(s.ProtectedPaths, abs)
		}
	}
	s.ReadOnlyDirs = c.ReadOnlyDirs()
	s.ConfinedServers = policy.BuiltinConfinedServers()
	s.SessionSandboxRoot = c.SessionWorkspaces.Root
	s.Secrets = c.Secrets.Scan()
	s.UnsafeAllowAddresses, _ = c.Egress.UnsafePrefixes() // validated by Parse
	s.CatalogAnnotations = c.CatalogAnnotations()
	for name, sc := range c.Servers {
		if len(sc.AllowedDomains) > 0 {
			if s.DomainAllowlists == nil {
				s.DomainAllowlists = map[string][]string{}
			}
			s.DomainAllowlists[name] = append([]string(nil), sc.AllowedDomains...)
		}
	}
	return s
}

// copyRoles copies rs, keeping the difference between nil (the engine's
// default) and empty (nothing is sandbox-safe).
func copyRoles(rs []policy.Role) []policy.Role {
	if rs == nil {
		return nil
	}
	return append([]policy.Role{}, rs...)
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
