// Package gatewayconfig reads what the compiler needs from the gateway's
// deployment settings: the policy settings verification must run with
// (sandbox, protected paths and branches, trusted servers, per-server domain
// allowlists) and the launch command of each external MCP server.
//
// It reads gateway.yaml through the gateway's own loader
// (ironcurtain.dev/gateway/config: strict, the whole file validated, so the
// compiler never works from a file `ironcurtain serve` would refuse, and
// verification uses the policy settings the gateway derives from it), or an
// mcp-servers.json file in the original's shape:
// {"mcpServers": {name: {command, args, env}}} or the same map without the
// wrapper.
package gatewayconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	gwconfig "ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/policy"
)

// DefaultSandbox is the gateway's default sandbox.
const DefaultSandbox = "/workspace"

// Server is one configured tool server.
type Server struct {
	Name           string
	Command        string
	Args           []string
	Env            map[string]string
	AllowedDomains []string
}

// External reports whether the server is launched as a child process.
func (s Server) External() bool { return s.Command != "" }

// Config is what the compiler read.
type Config struct {
	File              string
	Sandbox           string
	ProtectedPaths    []string
	ProtectedBranches []string
	TrustedServers    []string
	// SandboxSafeRoles are the path roles sandbox containment resolves
	// (nil: the engine's default).
	SandboxSafeRoles []policy.Role
	Servers          []Server
	// gateway holds the settings the gateway builds from a gateway.yaml
	// (nil for an mcp-servers.json).
	gateway *policy.Settings
}

// serverYAML is one server of an mcp-servers.json.
type serverYAML struct {
	Command        string            `json:"command"`
	Args           []string          `json:"args"`
	Env            map[string]string `json:"env"`
	AllowedDomains []string          `json:"allowed_domains"`
}

// Load reads a gateway.yaml (.yaml/.yml) or an mcp-servers.json (.json).
// home expands a leading ~ in paths.
func Load(path, home string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading server config: %w", err)
	}
	var c *Config
	if strings.EqualFold(filepath.Ext(path), ".json") {
		c, err = parseJSON(path, b)
	} else {
		c, err = parseYAML(path, b, home)
	}
	if err != nil {
		return nil, fmt.Errorf("loading server config: %w", err)
	}
	return c, nil
}

func parseYAML(path string, _ []byte, home string) (*Config, error) {
	gc, err := gwconfig.Load(path)
	if err != nil {
		return nil, err
	}
	st := gc.PolicySettings()
	st.Home = home
	c := &Config{File: path, Sandbox: gc.Sandbox(), ProtectedPaths: st.ProtectedPaths, ProtectedBranches: st.ProtectedBranches,
		TrustedServers: st.TrustedServers, SandboxSafeRoles: st.SandboxSafeRoles, gateway: &st}
	for _, sv := range gc.Servers() {
		c.Servers = append(c.Servers, Server{Name: sv.Name, Command: sv.Command, Args: sv.Args, Env: sv.Env, AllowedDomains: sv.AllowedDomains})
	}
	return c, nil
}

func parseJSON(path string, b []byte) (*Config, error) {
	var wrapped struct {
		MCPServers map[string]serverYAML `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&wrapped); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	field := "mcpServers"
	servers := wrapped.MCPServers
	if servers == nil {
		field = ""
		if err := json.Unmarshal(b, &servers); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	list, err := convert(path, field, servers)
	if err != nil {
		return nil, err
	}
	return &Config{File: path, Sandbox: DefaultSandbox, Servers: list}, nil
}

func convert(file, field string, m map[string]serverYAML) ([]Server, error) {
	var out []Server
	var errs []error
	for name, s := range m {
		at := name
		if field != "" {
			at = field + "." + name
		}
		if name == "" || strings.Contains(name, "__") {
			errs = append(errs, fmt.Errorf("%s: %s: server names must be non-empty and must not contain \"__\"", file, at))
		}
		for i, d := range s.AllowedDomains {
			if err := policy.ValidateDomainPattern(d); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s.allowed_domains[%d]: %w", file, at, i, err))
			}
		}
		out = append(out, Server{Name: name, Command: s.Command, Args: s.Args, Env: s.Env, AllowedDomains: s.AllowedDomains})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// Settings returns the policy settings the gateway would use (home expands ~):
// for a gateway.yaml exactly the gateway's (config.PolicySettings).
func (c *Config) Settings(home string) policy.Settings {
	if c.gateway != nil {
		s := *c.gateway // a copy the caller may change
		s.Home = home
		s.ProtectedPaths = append([]string(nil), s.ProtectedPaths...)
		s.ProtectedBranches = append([]string(nil), s.ProtectedBranches...)
		s.TrustedServers = append([]string(nil), s.TrustedServers...)
		if s.DomainAllowlists != nil {
			m := make(map[string][]string, len(s.DomainAllowlists))
			for k, v := range s.DomainAllowlists {
				m[k] = append([]string(nil), v...)
			}
			s.DomainAllowlists = m
		}
		return s
	}
	s := policy.Settings{
		Sandbox:           c.Sandbox,
		ProtectedPaths:    append([]string(nil), c.ProtectedPaths...),
		ProtectedBranches: append([]string(nil), c.ProtectedBranches...),
		TrustedServers:    append([]string(nil), c.TrustedServers...),
		SandboxSafeRoles:  c.SandboxSafeRoles,
		Home:              home,
	}
	for _, sv := range c.Servers {
		if len(sv.AllowedDomains) > 0 {
			if s.DomainAllowlists == nil {
				s.DomainAllowlists = map[string][]string{}
			}
			s.DomainAllowlists[sv.Name] = append([]string(nil), sv.AllowedDomains...)
		}
	}
	return s
}
