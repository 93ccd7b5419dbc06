// Package catalog is the catalog of well-known third-party MCP servers that
// ships with the gateway: for each server and version, how to run it and
// the reviewed tool annotations (argument roles, in the format of
// tool-annotations.json) with the pins of the tool definitions they were
// reviewed against. A server configured with
//
//	servers:
//	  gh:
//	    catalog: github@v1.10.1-3-g64a49f34
//
// gets these annotations without a model or a compile step (the annotations
// file, when it annotates the same tool, wins: re-pinning with `ironcurtain
// tools pin` keeps working). A tool whose listed definition differs from the
// catalog's pin stays hidden, as any external tool whose pin does not match;
// an entry without a pin (a version nobody listed yet) stays hidden until it
// is pinned.
//
// Entries are reviewed by hand and conservative: owner and repository
// arguments carry the GitHub roles, branch names and commit messages their
// roles, local paths their path roles, and a merge tool keeps its name so
// that the policy engine's structural PR-merge check denies it.
package catalog

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"ironcurtain.dev/gateway/policy"
)

//go:embed servers/*.json
var files embed.FS

// Server is one catalog entry.
type Server struct {
	// Name is the catalog name ("github", "memory").
	Name string `json:"name"`
	// ConfigName is the name `servers add` configures it under (default
	// Name; set when Name is taken by a built-in server).
	ConfigName string `json:"configName,omitempty"`
	// Summary says what the server is, in one line.
	Summary string `json:"summary"`
	// Source is where the server comes from (module, package).
	Source string `json:"source"`
	// Versions are newest first.
	Versions []*Version `json:"versions"`
}

// Version is one reviewed version of a server.
type Version struct {
	Version string `json:"version"`
	// Command and Args run it as a child (command:); Env names the
	// variables it needs, as ${NAME} references to the gateway's
	// environment.
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Notes are shown by `ironcurtain servers add`.
	Notes string `json:"notes,omitempty"`
	// Tools are the reviewed annotations; serverName is the catalog name
	// and is replaced by the configured name (Annotations).
	Tools []policy.ToolAnnotation `json:"tools"`
}

// Catalog is the loaded catalog.
type Catalog struct {
	servers map[string]*Server
}

var nameRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]|_[a-z0-9-])*$`)

// Load parses the embedded catalog and checks every entry.
func Load() (*Catalog, error) {
	names, err := files.ReadDir("servers")
	if err != nil {
		return nil, fmt.Errorf("loading catalog: %w", err)
	}
	c := &Catalog{servers: map[string]*Server{}}
	for _, n := range names {
		b, err := files.ReadFile(path.Join("servers", n.Name()))
		if err != nil {
			return nil, fmt.Errorf("loading catalog: %w", err)
		}
		s, err := parseServer(b)
		if err != nil {
			return nil, fmt.Errorf("loading catalog: %s: %w", n.Name(), err)
		}
		if s.Name+".json" != n.Name() {
			return nil, fmt.Errorf("loading catalog: %s holds server %q", n.Name(), s.Name)
		}
		c.servers[s.Name] = s
	}
	return c, nil
}

// Shipped returns the embedded catalog, loaded once. Callers must not
// change what it returns (Version.Annotations returns copies).
var Shipped = sync.OnceValues(Load)

// parseServer decodes one entry strictly (unknown fields, trailing data
// refused) and checks it.
func parseServer(b []byte) (*Server, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Server
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the entry")
	}
	for _, n := range []string{s.Name, s.ConfigName} {
		if n == s.ConfigName && n == "" {
			continue
		}
		if !nameRE.MatchString(n) || strings.Contains(n, "__") {
			return nil, fmt.Errorf("name %q: lower-case letters, digits, '-' and single '_'", n)
		}
	}
	if len(s.Versions) == 0 {
		return nil, errors.New("versions: none")
	}
	seen := map[string]bool{}
	for i, v := range s.Versions {
		field := fmt.Sprintf("versions[%d]", i)
		if v == nil || v.Version == "" || strings.ContainsAny(v.Version, "@ \t\n") {
			return nil, fmt.Errorf("%s.version: missing or not a plain version", field)
		}
		if seen[v.Version] {
			return nil, fmt.Errorf("%s.version: duplicate %q", field, v.Version)
		}
		seen[v.Version] = true
		if v.Command == "" {
			return nil, fmt.Errorf("%s.command: missing", field)
		}
		tools := map[string]bool{}
		for j, t := range v.Tools {
			if t.Tool == "" || tools[t.Tool] {
				return nil, fmt.Errorf("%s.tools[%d]: missing or duplicate toolName %q", field, j, t.Tool)
			}
			tools[t.Tool] = true
			if t.Server != s.Name {
				return nil, fmt.Errorf("%s.tools[%d].serverName: %q, want %q", field, j, t.Server, s.Name)
			}
		}
	}
	return &s, nil
}

// Names returns the catalog's server names, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, 0, len(c.servers))
	for n := range c.servers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrNotFound is returned by Lookup for a server or version not in the
// catalog.
var ErrNotFound = errors.New("not in the catalog")

// ParseRef splits "name@version" (version may be empty: "name").
func ParseRef(ref string) (name, version string, err error) {
	name, version, _ = strings.Cut(ref, "@")
	if !nameRE.MatchString(name) {
		return "", "", fmt.Errorf("catalog reference %q: want name@version", ref)
	}
	if strings.Contains(ref, "@") && version == "" {
		return "", "", fmt.Errorf("catalog reference %q: empty version", ref)
	}
	return name, version, nil
}

// Lookup returns the server and version a reference names: "name@version",
// or "name" for the newest version.
func (c *Catalog) Lookup(ref string) (*Server, *Version, error) {
	name, version, err := ParseRef(ref)
	if err != nil {
		return nil, nil, err
	}
	s := c.servers[name]
	if s == nil {
		return nil, nil, fmt.Errorf("server %q: %w (known: %s)", name, ErrNotFound, strings.Join(c.Names(), ", "))
	}
	if version == "" {
		return s, s.Versions[0], nil
	}
	for _, v := range s.Versions {
		if v.Version == version {
			return s, v, nil
		}
	}
	known := make([]string, len(s.Versions))
	for i, v := range s.Versions {
		known[i] = v.Version
	}
	return nil, nil, fmt.Errorf("%s version %q: %w (known: %s)", name, version, ErrNotFound, strings.Join(known, ", "))
}

// Annotations returns the version's annotations for a server configured
// under the name server.
func (v *Version) Annotations(server string) []policy.ToolAnnotation {
	out := make([]policy.ToolAnnotation, len(v.Tools))
	for i, t := range v.Tools {
		t.Server = server
		t.Args = append([]policy.ArgAnnotation(nil), t.Args...)
		if t.Pin != nil {
			p := *t.Pin
			t.Pin = &p
		}
		out[i] = t
	}
	return out
}

// Snippet is the gateway.yaml section that runs version v of s under its
// catalog name.
func Snippet(s *Server, v *Version) string {
	var b strings.Builder
	name := s.ConfigName
	if name == "" {
		name = s.Name
	}
	fmt.Fprintf(&b, "servers:\n  %s:\n    catalog: %s@%s\n    command: %s\n", name, s.Name, v.Version, v.Command)
	if len(v.Args) > 0 {
		q := make([]string, len(v.Args))
		for i, a := range v.Args {
			j, _ := json.Marshal(a)
			q[i] = string(j)
		}
		fmt.Fprintf(&b, "    args: [%s]\n", strings.Join(q, ", "))
	}
	if len(v.Env) > 0 {
		b.WriteString("    env:\n")
		keys := make([]string, 0, len(v.Env))
		for k := range v.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "      %s: %s\n", k, v.Env[k])
		}
	}
	return b.String()
}

// ImageRunner says how the server of v is packaged as an image (images/servers):
// for npx and uvx the runtime ("node", "python") and the package the runner
// names; for anything else ("", "") and the server is a binary of its own.
// serverArgs are the arguments the image's entry point takes: for a runner,
// those after the package; otherwise v.Args.
func (v *Version) ImageRunner() (runtime, pkg string, serverArgs []string) {
	switch path.Base(v.Command) {
	case "npx":
		runtime = "node"
	case "uvx":
		runtime = "python"
	default:
		return "", "", v.Args
	}
	for i, a := range v.Args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		return runtime, a, v.Args[i+1:]
	}
	return runtime, "", nil
}

// ImageSnippet is what runs version v of s in image: mode, confined in its
// own container by the launcher: the gateway.yaml section (the catalog line
// and the image) and the launcher.yaml entry (the same image, the server
// network, the entry point's arguments). Environment variables the version
// needs are listed as comments: the launcher's env is literal, so a secret
// goes there (or in a secret file) by hand, never through the gateway.
func ImageSnippet(s *Server, v *Version, image, network string) string {
	var b strings.Builder
	name := s.ConfigName
	if name == "" {
		name = s.Name
	}
	q := func(x string) string { j, _ := json.Marshal(x); return string(j) }
	runtime, pkg, args := v.ImageRunner()
	switch {
	case runtime != "" && pkg != "":
		name, version := splitPackage(pkg)
		if version == "" {
			version = "<exact version>"
		}
		fmt.Fprintf(&b, "# The image: make server-image RUNTIME=%s PACKAGE=%s VERSION=%s (images/servers/%s)\n", runtime, name, version, runtime)
	default:
		fmt.Fprintf(&b, "# The image: %s on a base image, as %s (docs/tools.md, \"image: mode\")\n", s.Source, v.Command)
	}
	fmt.Fprintf(&b, "\n# gateway.yaml\nservers:\n  %s:\n    catalog: %s@%s\n    image: %s\n", name, s.Name, v.Version, q(image))
	b.WriteString("    # egress:\n    #   allowed_hosts: []   # the hosts it may reach through the egress proxy (none by default)\n")
	fmt.Fprintf(&b, "\n# launcher.yaml (the launcher's own configuration; the same image)\nservers:\n  %s:\n    image: %s\n    network: %s\n", name, q(image), network)
	if len(args) > 0 {
		qa := make([]string, len(args))
		for i, a := range args {
			qa[i] = q(a)
		}
		fmt.Fprintf(&b, "    args: [%s]\n", strings.Join(qa, ", "))
	}
	if len(v.Env) > 0 {
		keys := make([]string, 0, len(v.Env))
		for k := range v.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		// A variable naming an absolute file is where the server keeps its
		// state: the container's root is read-only, so that file moves to a
		// writable volume of its own.
		files := false
		for _, k := range keys {
			files = files || path.IsAbs(v.Env[k])
		}
		if files {
			fmt.Fprintf(&b, "    # volumes (the root is read-only: the file it keeps lives on a volume):\n    #   - {name: %s, target: %s, writable: true}\n", q(name+"-data"), imageDataDir)
		}
		b.WriteString("    # env (literal values: the gateway never sees them):\n")
		for _, k := range keys {
			val := v.Env[k]
			if path.IsAbs(val) {
				val = path.Join(imageDataDir, path.Base(val))
			}
			fmt.Fprintf(&b, "    #   %s: <%s>\n", k, val)
		}
	}
	return b.String()
}

// imageDataDir is where ImageSnippet mounts the volume of a server that
// keeps a file (its env names one).
const imageDataDir = "/data"

// splitPackage splits a runner's package argument into name and version:
// "@scope/name@1.2.3" (npm), "name==1.2.3" (PyPI); version is "" when the
// argument names none.
func splitPackage(pkg string) (name, version string) {
	if n, v, ok := strings.Cut(pkg, "=="); ok {
		return n, v
	}
	if i := strings.LastIndex(pkg, "@"); i > 0 {
		return pkg[:i], pkg[i+1:]
	}
	return pkg, ""
}
