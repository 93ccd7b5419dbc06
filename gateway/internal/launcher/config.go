package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Defaults for a server's limits.
const (
	DefaultMemoryMB  = 256
	DefaultPids      = 128
	DefaultCPUs      = 0.5
	DefaultTmpfsMB   = 64
	DefaultUser      = "65534:65534"
	maxTokenFileSize = 4096
	minTokenBytes    = 32
)

// Config is the launcher's own configuration file (launcher.yaml).
//
//	socket: /run/ironcurtain-launcher/launcher.sock
//	socket_gid: 10001              # the gateway's group
//	token_file: /run/secrets/launcher-token
//	proxy: gateway:8081            # the egress proxy as the servers' networks reach it
//	servers:
//	  notes:
//	    image: example.org/notes-mcp@sha256:...
//	    args: ["--stdio"]
//	    network: ironcurtain-srv-notes
//	    env: {NOTES_DIR: /data}
//	    secret_files: [{source: /run/secrets/notes-token, target: /run/secrets/notes-token}]
//	    volumes: [{name: notes-data, target: /data, writable: true}]
//	    memory_mb: 256
//	    pids: 128
//	    cpus: 0.5
type Config struct {
	// Socket is the unix socket the launcher listens on.
	Socket string `yaml:"socket"`
	// SocketGID, when set, is the group given the socket (the gateway's
	// group: the socket is mode 0660).
	SocketGID *int `yaml:"socket_gid"`
	// TokenFile holds the token the gateway presents (and from which the
	// servers' proxy identities are derived, ProxyIdentity).
	TokenFile string `yaml:"token_file"`
	// Proxy is host:port of the gateway's egress proxy on the servers'
	// networks. Empty: the servers get no proxy variables.
	Proxy string `yaml:"proxy"`
	// Servers are the only servers the launcher starts.
	Servers map[string]ServerConfig `yaml:"servers"`
}

// ServerConfig is one server's container, fixed by the launcher's operator.
type ServerConfig struct {
	// Image is the image reference (pin a digest). The launcher never
	// pulls: the image must be present.
	Image string `yaml:"image"`
	// Args is the container command (default: the image's).
	Args []string `yaml:"args"`
	// Network is the server's own network (an internal one whose only
	// other member is the egress proxy), or "none".
	Network string `yaml:"network"`
	// User is uid[:gid], never root (default DefaultUser).
	User string `yaml:"user"`
	// Env are literal variables for the server.
	Env map[string]string `yaml:"env"`
	// SecretFiles are host files mounted read-only into the container.
	SecretFiles []SecretFile `yaml:"secret_files"`
	// Volumes are named Docker volumes (never host paths).
	Volumes []Volume `yaml:"volumes"`
	// MemoryMB, Pids and CPUs are the limits (0: the defaults).
	MemoryMB int64   `yaml:"memory_mb"`
	Pids     int64   `yaml:"pids"`
	CPUs     float64 `yaml:"cpus"`
	// TmpfsMB is the size of the writable /tmp.
	TmpfsMB int64 `yaml:"tmpfs_mb"`
}

// SecretFile is a host file mounted read-only at Target.
type SecretFile struct {
	Source string `yaml:"source"`
	Target string `yaml:"target"`
}

// Volume is a named volume mounted at Target, read-only unless Writable.
type Volume struct {
	Name     string `yaml:"name"`
	Target   string `yaml:"target"`
	Writable bool   `yaml:"writable"`
}

var (
	// ServerNameRE is the form of a server name (as gateway.yaml's).
	ServerNameRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]|_[a-z0-9-])*$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	volumeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	networkRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	userRE       = regexp.MustCompile(`^[0-9]+(?::[0-9]+)?$`)
)

// reservedEnv are set by the launcher; the configuration cannot set them.
var reservedEnv = map[string]bool{"HTTPS_PROXY": true, "HTTP_PROXY": true, "https_proxy": true, "http_proxy": true,
	"NO_PROXY": true, "no_proxy": true, "ALL_PROXY": true, "all_proxy": true}

// forbiddenNetworks would give a server more than its own network.
var forbiddenNetworks = map[string]bool{"host": true, "bridge": true, "default": true}

// LoadConfig reads and validates the launcher's configuration file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading launcher config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("loading launcher config %s: %w", filepath.Base(path), err)
	}
	return c, nil
}

// ParseConfig parses (unknown keys are errors) and validates data.
func ParseConfig(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks c and fills in defaults; each error names its field.
func (c *Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if !filepath.IsAbs(c.Socket) {
		add("socket", "must be an absolute path")
	}
	if c.SocketGID != nil && (*c.SocketGID < 0 || *c.SocketGID > 1<<31-2) {
		add("socket_gid", "must be a group id")
	}
	if !filepath.IsAbs(c.TokenFile) {
		add("token_file", "must be an absolute path")
	}
	if c.Proxy != "" {
		host, port, err := net.SplitHostPort(c.Proxy)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 || strings.ContainsAny(host, "@/ ") {
			add("proxy", "must be host:port")
		}
	}
	if len(c.Servers) == 0 {
		add("servers", "names no server")
	}
	for _, name := range sortedKeys(c.Servers) {
		s := c.Servers[name]
		f := "servers." + name
		if !ServerNameRE.MatchString(name) || strings.Contains(name, "__") || len(name) > 48 {
			add(f, "a server name uses lower-case letters, digits, '-' and single '_' (at most 48)")
		}
		if s.Image == "" || strings.ContainsAny(s.Image, " \t\r\n\x00") {
			add(f+".image", "must be an image reference")
		}
		for i, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				add(fmt.Sprintf("%s.args[%d]", f, i), "must not contain a NUL byte")
			}
		}
		switch {
		case s.Network == "":
			add(f+".network", "is required (the server's own internal network, or none)")
		case forbiddenNetworks[s.Network] || strings.Contains(s.Network, ":") || !networkRE.MatchString(s.Network):
			add(f+".network", "%q is not a network of its own (host, bridge, default and container:… are refused)", s.Network)
		}
		if s.User == "" {
			s.User = DefaultUser
		}
		if !userRE.MatchString(s.User) {
			add(f+".user", "must be uid or uid:gid (numeric)")
		} else if uid, _, _ := strings.Cut(s.User, ":"); strings.TrimLeft(uid, "0") == "" {
			add(f+".user", "must not be root")
		}
		for _, k := range sortedKeys(s.Env) {
			switch {
			case !envNameRE.MatchString(k):
				add(f+".env."+k, "is not a valid variable name")
			case reservedEnv[k]:
				add(f+".env."+k, "is set by the launcher (the proxy identity)")
			case strings.ContainsRune(s.Env[k], 0):
				add(f+".env."+k, "must not contain a NUL byte")
			}
		}
		targets := map[string]string{}
		target := func(field, t string) {
			switch {
			case !filepath.IsAbs(t) || filepath.Clean(t) != t || t == "/":
				add(field, "must be a clean absolute path other than /")
			case t == "/tmp" || strings.HasPrefix(t, "/proc") || strings.HasPrefix(t, "/sys") || strings.HasPrefix(t, "/dev"):
				add(field, "%q is reserved", t)
			case targets[t] != "":
				add(field, "%q is also the target of %s", t, targets[t])
			default:
				targets[t] = field
			}
		}
		for i, sf := range s.SecretFiles {
			sfield := fmt.Sprintf("%s.secret_files[%d]", f, i)
			// A path on the Docker host (the daemon refuses a missing one
			// when the container starts).
			if !filepath.IsAbs(sf.Source) || filepath.Clean(sf.Source) != sf.Source || sf.Source == "/" {
				add(sfield+".source", "must be a clean absolute path of a file on the Docker host")
			}
			target(sfield+".target", sf.Target)
		}
		for i, v := range s.Volumes {
			vfield := fmt.Sprintf("%s.volumes[%d]", f, i)
			if !volumeNameRE.MatchString(v.Name) {
				add(vfield+".name", "must be a named volume (not a host path)")
			}
			target(vfield+".target", v.Target)
		}
		if s.MemoryMB == 0 {
			s.MemoryMB = DefaultMemoryMB
		}
		if s.Pids == 0 {
			s.Pids = DefaultPids
		}
		if s.CPUs == 0 {
			s.CPUs = DefaultCPUs
		}
		if s.TmpfsMB == 0 {
			s.TmpfsMB = DefaultTmpfsMB
		}
		if s.MemoryMB < 16 || s.MemoryMB > 16384 {
			add(f+".memory_mb", "must be between 16 and 16384")
		}
		if s.Pids < 8 || s.Pids > 4096 {
			add(f+".pids", "must be between 8 and 4096")
		}
		if s.CPUs < 0.01 || s.CPUs > 16 {
			add(f+".cpus", "must be between 0.01 and 16")
		}
		if s.TmpfsMB < 1 || s.TmpfsMB > 4096 {
			add(f+".tmpfs_mb", "must be between 1 and 4096")
		}
		c.Servers[name] = s
	}
	return errors.Join(errs...)
}

// ReadToken reads a token file: one line of at least 32 bytes.
func ReadToken(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading token: %w", err)
	}
	defer f.Close()
	b := make([]byte, maxTokenFileSize+1)
	n, _ := f.Read(b)
	if n > maxTokenFileSize {
		return nil, errors.New("reading token: the token file is too large")
	}
	tok := bytes.TrimSpace(b[:n])
	if len(tok) < minTokenBytes || bytes.ContainsAny(tok, " \t\r\n") {
		return nil, fmt.Errorf("reading token: %s must hold one token of at least %d characters", filepath.Base(path), minTokenBytes)
	}
	return tok, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
