package deploy

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoPath returns a path relative to the repository root (this package is
// e2e/deploy).
func repoPath(rel string) string { return filepath.Join("..", "..", filepath.FromSlash(rel)) }

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoPath(rel))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return b
}

func decodeYAML(t *testing.T, rel string, into any) {
	t.Helper()
	if err := yaml.Unmarshal(readFile(t, rel), into); err != nil {
		t.Fatalf("parsing %s: %v", rel, err)
	}
}

// listeners are the listen addresses of a gateway.yaml (only the keys these
// tests need; the gateway's own test parses the whole file strictly).
type listeners struct {
	Agent struct {
		Listen string `yaml:"listen"`
	} `yaml:"agent"`
	Egress struct {
		Listen string `yaml:"listen"`
	} `yaml:"egress"`
	Ops struct {
		Listen string `yaml:"listen"`
	} `yaml:"ops"`
}

// Defaults of the gateway (gateway/config) for absent listen keys.
const (
	defaultAgentListen  = ":8080"
	defaultEgressListen = ":3128"
	defaultOpsListen    = ":8081"
)

func loadListeners(t *testing.T, rel string) (agent, egress, ops hostPort) {
	t.Helper()
	var l listeners
	decodeYAML(t, rel, &l)
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return mustHostPort(t, rel+" agent.listen", or(l.Agent.Listen, defaultAgentListen)),
		mustHostPort(t, rel+" egress.listen", or(l.Egress.Listen, defaultEgressListen)),
		mustHostPort(t, rel+" ops.listen", or(l.Ops.Listen, defaultOpsListen))
}

type hostPort struct {
	Host string
	Port int
}

func mustHostPort(t *testing.T, what, addr string) hostPort {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %q: %v", what, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s: %q: port: %v", what, addr, err)
	}
	return hostPort{Host: h, Port: n}
}

// urlHostPort splits the authority of an http URL (userinfo dropped).
func urlHostPort(t *testing.T, what, raw string) (hostPort, string) {
	t.Helper()
	m := regexp.MustCompile(`^http://(?:[^@/]*@)?([^/]+)(/.*)?$`).FindStringSubmatch(raw)
	if m == nil {
		t.Fatalf("%s: %q is not an http URL", what, raw)
	}
	return mustHostPort(t, what, m[1]), m[2]
}

// varRefs returns the names of the ${NAME...} references in s.
func varRefs(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// credentialNames are variables that hold a gateway secret; none may reach
// the agent.
var credentialNames = regexp.MustCompile(`(?i)(API_KEY|GITHUB_TOKEN|GH_TOKEN|OPERATOR_TOKEN|DATABASE_URL|PASSWORD|SECRET|PRIVATE_KEY|AWS_|GOOGLE_APPLICATION_CREDENTIALS)`)

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isWildcard(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func lines(b []byte) []string { return strings.Split(string(b), "\n") }
