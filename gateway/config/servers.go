package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"ironcurtain.dev/gateway/netpolicy"
)

// Built-in server names: they are served in-process and take no launch
// settings.
var builtinServers = map[string]bool{"filesystem": true, "git": true, "github": true, "fetch": true}

var (
	externalNameRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]|_[a-z0-9-])*$`)
	envNameRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envRefRE       = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)
)

// External reports whether the server is an external MCP server: a stdio
// child (command), a stdio server in its own container (image) or a remote
// one (url).
func (s ServerConfig) External() bool { return s.Command != "" || s.Image != "" || s.URL != "" }

// ServerEgress is servers.<name>.egress: what an image server may reach
// through the egress proxy under its own proxy identity.
type ServerEgress struct {
	// AllowedHosts are host patterns as egress.allowed_hosts; nothing else
	// is reachable (no escalation, no session approvals).
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Patterns parses AllowedHosts (validated by Load).
func (e ServerEgress) Patterns() ([]netpolicy.Pattern, error) {
	ps, err := netpolicy.ParsePatterns(e.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("egress.allowed_hosts: %w", err)
	}
	return ps, nil
}

// ImageServers returns the names of the image: servers, sorted.
func (c *Config) ImageServers() []string {
	var out []string
	for name, s := range c.Servers {
		if s.Image != "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ExternalServers returns the names of the configured external servers,
// sorted.
func (c *Config) ExternalServers() []string {
	var out []string
	for name, s := range c.Servers {
		if s.External() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// launchErrors checks the launch settings of server name (fields relative
// to servers.<name>).
//
//	servers:
//	  notes:
//	    command: /usr/local/bin/notes-mcp
//	    args: ["--stdio"]
//	    env:
//	      NOTES_DIR: /srv/notes
//	      NOTES_TOKEN: ${NOTES_TOKEN}   # taken from the gateway's environment
//	    allowed_domains: [notes.example.com]
func (s ServerConfig) launchErrors(name string) []*FieldError {
	var errs []*FieldError
	add := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	if s.Image == "" && len(s.Egress.AllowedHosts) > 0 {
		add("egress.allowed_hosts", errors.New("is set but image is not (only image servers have their own egress identity)"))
	}
	for i, h := range s.Egress.AllowedHosts {
		if _, err := netpolicy.ParsePattern(h); err != nil {
			add(fmt.Sprintf("egress.allowed_hosts[%d]", i), err)
		}
	}
	if s.Image != "" {
		switch {
		case s.Command != "":
			add("image", errors.New("and command are exclusive: a server runs either in its own container (image) or as a child process (command)"))
		case len(s.Args) > 0:
			add("args", errors.New("an image server's command and arguments are set in the launcher's configuration"))
		case len(s.Env) > 0:
			add("env", errors.New("an image server's environment is set in the launcher's configuration"))
		}
		if builtinServers[name] {
			add("image", fmt.Errorf("%q is a built-in server; give the external server another name", name))
		}
		if !externalNameRE.MatchString(name) || strings.Contains(name, "__") {
			add("", errors.New("an external server name uses lower-case letters, digits, '-' and single '_' (it prefixes the tool names as name__tool)"))
		}
		if strings.ContainsAny(s.Image, " \t\r\n\x00") {
			add("image", errors.New("must be an image reference"))
		}
		return errs
	}
	if s.Command == "" {
		if len(s.Args) > 0 {
			add("args", errors.New("is set but command is not (only external servers take args)"))
		}
		if len(s.Env) > 0 {
			add("env", errors.New("is set but command is not (only external servers take env)"))
		}
		return errs
	}
	if builtinServers[name] {
		add("command", fmt.Errorf("%q is a built-in server; give the external server another name", name))
	}
	if !externalNameRE.MatchString(name) || strings.Contains(name, "__") {
		add("", errors.New("an external server name uses lower-case letters, digits, '-' and single '_' (it prefixes the tool names as name__tool)"))
	}
	if strings.ContainsAny(s.Command, "\x00\n\r") || strings.TrimSpace(s.Command) != s.Command {
		add("command", errors.New("must not contain control characters or surrounding spaces"))
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			add(fmt.Sprintf("args[%d]", i), errors.New("must not contain a NUL byte"))
		}
	}
	for _, k := range sortedKeys(s.Env) {
		v := s.Env[k]
		field := "env." + k
		if !envNameRE.MatchString(k) {
			add(field, errors.New("is not a valid environment variable name"))
		}
		if strings.ContainsRune(v, 0) {
			add(field, errors.New("must not contain a NUL byte"))
		}
		if strings.Contains(v, "${") && !envRefRE.MatchString(v) {
			add(field, errors.New(`a reference to the gateway's environment is the whole value, written ${NAME}`))
		}
	}
	return errs
}

// LaunchEnv returns the variables to give the external server: literal
// values as written, and ${NAME} values read from the gateway's environment
// through getenv. A reference to an unset variable is an error naming the
// field, so a missing secret stops the gateway at start-up.
func (s ServerConfig) LaunchEnv(name string, getenv func(string) string) (map[string]string, error) {
	out := make(map[string]string, len(s.Env))
	for _, k := range sortedKeys(s.Env) {
		v := s.Env[k]
		if m := envRefRE.FindStringSubmatch(v); m != nil {
			ref := getenv(m[1])
			if ref == "" {
				return nil, &FieldError{Field: "servers." + name + ".env." + k, Err: fmt.Errorf("refers to $%s, which is not set in the gateway's environment", m[1])}
			}
			v = ref
		}
		out[k] = v
	}
	return out, nil
}

// subField appends sub to field ("" : field itself).
func subField(field, sub string) string {
	if sub == "" {
		return field
	}
	return field + "." + sub
}

// ReadOnlyDirs returns servers.filesystem.read_only_dirs (resolved to
// absolute paths): what the filesystem server may read outside the sandbox.
func (c *Config) ReadOnlyDirs() []string {
	return append([]string(nil), c.Servers["filesystem"].ReadOnlyDirs...)
}

// readOnlyDirErrors checks servers.<name>.read_only_dirs: only the built-in
// filesystem server takes it; each entry is a distinct directory other
// than / that neither contains the sandbox nor lies inside it (fields
// relative to servers.<name>).
func (c *Config) readOnlyDirErrors(name string) []*FieldError {
	dirs := c.Servers[name].ReadOnlyDirs
	if len(dirs) == 0 {
		return nil
	}
	if name != "filesystem" {
		return []*FieldError{{Field: "read_only_dirs", Err: errors.New("only the built-in filesystem server reads directories outside the sandbox")}}
	}
	var errs []*FieldError
	sb := filepath.Clean(c.Sandbox)
	for i, d := range dirs {
		field := fmt.Sprintf("read_only_dirs[%d]", i)
		switch {
		case d == "" || strings.ContainsRune(d, 0):
			errs = append(errs, &FieldError{Field: field, Err: errors.New("empty path or NUL byte")})
		case !filepath.IsAbs(d):
			errs = append(errs, &FieldError{Field: field, Err: errors.New("must be an absolute path")})
		case filepath.Clean(d) == "/":
			errs = append(errs, &FieldError{Field: field, Err: errors.New("the root directory cannot be read-only-mounted: it contains the sandbox")})
		case pathWithin(filepath.Clean(d), sb) || pathWithin(sb, filepath.Clean(d)):
			errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf("%q overlaps the sandbox %q", d, sb)})
		}
		for j := 0; j < i; j++ {
			if filepath.Clean(dirs[j]) == filepath.Clean(d) {
				errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf("duplicate directory (also read_only_dirs[%d])", j)})
			}
		}
	}
	return errs
}

// pathWithin reports whether p is root or below it (clean absolute paths).
func pathWithin(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}
