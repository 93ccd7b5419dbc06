// Package doctor checks, from inside the agent container, that the
// container is what IronCurtain assumes: no direct route to the internet,
// a gateway proxy that answers (and refuses hosts it does not list), an MCP
// endpoint that answers, and no credential-like environment variable or
// file. Each check is one line of output; any failure fails the doctor.
package doctor

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Defaults for the network probes. They are only ever dialled from inside
// the agent container, where they must fail.
var (
	DefaultDirectTargets = []string{"1.1.1.1:443", "8.8.8.8:53"}
	DefaultDNSName       = "example.com"
	DefaultUnlistedHost  = "ironcurtain-doctor.invalid:443"
)

// DefaultTimeout bounds each network probe.
const DefaultTimeout = 3 * time.Second

// Config says what to check and how. Dial and LookupHost are injectable
// so tests never touch the network.
type Config struct {
	Environ       []string // KEY=VALUE pairs (os.Environ())
	Home          string   // the home directory to look for credential files in
	ProxyURL      string   // HTTPS_PROXY, e.g. http://agent:<token>@gateway:3128
	DirectTargets []string // public addresses that must not be reachable
	DNSName       string   // a public name that must not resolve to anything reachable
	UnlistedHost  string   // host:port the proxy must refuse
	AllowedHost   string   // optional host:port the proxy must allow
	Timeout       time.Duration
	// CheckMCP initialises an MCP session and lists tools, returning the
	// number of tools.
	CheckMCP   func(ctx context.Context) (int, error)
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// SystemRoot prefixes the system-wide credential paths (/run/secrets,
	// the Docker socket, ...); "" means "/". Tests point it at a temp dir.
	SystemRoot string
	// ExtraFiles are absolute paths checked in addition to the defaults.
	ExtraFiles []string
}

// Check is the result of one check.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.DirectTargets == nil {
		c.DirectTargets = DefaultDirectTargets
	}
	if c.DNSName == "" {
		c.DNSName = DefaultDNSName
	}
	if c.UnlistedHost == "" {
		c.UnlistedHost = DefaultUnlistedHost
	}
	if c.Dial == nil {
		d := &net.Dialer{}
		c.Dial = d.DialContext
	}
	if c.LookupHost == nil {
		c.LookupHost = net.DefaultResolver.LookupHost
	}
	return c
}

// Run performs every check.
func Run(ctx context.Context, cfg Config) []Check {
	cfg = cfg.withDefaults()
	checks := []Check{
		checkDirect(ctx, cfg),
		checkDNS(ctx, cfg),
	}
	checks = append(checks, checkProxy(ctx, cfg)...)
	checks = append(checks,
		checkMCP(ctx, cfg),
		checkEnv(cfg.Environ),
		checkFiles(cfg.Home, cfg.SystemRoot, cfg.ExtraFiles),
	)
	return checks
}

// Print writes one line per check and returns the number of failures.
func Print(w io.Writer, checks []Check) int {
	failed := 0
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "%s %-20s %s\n", mark, c.Name, c.Detail)
	}
	return failed
}

func checkDirect(ctx context.Context, cfg Config) Check {
	c := Check{Name: "direct internet"}
	var refused []string
	for _, target := range cfg.DirectTargets {
		dctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		conn, err := cfg.Dial(dctx, "tcp", target)
		cancel()
		if err == nil {
			_ = conn.Close()
			c.Detail = fmt.Sprintf("connected to %s without the proxy: this container has a route to the internet", target)
			return c
		}
		refused = append(refused, fmt.Sprintf("%s (%s)", target, shortErr(err)))
	}
	c.OK = true
	c.Detail = "no direct connection: " + strings.Join(refused, ", ")
	return c
}

func checkDNS(ctx context.Context, cfg Config) Check {
	c := Check{Name: "public DNS"}
	lctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	addrs, err := cfg.LookupHost(lctx, cfg.DNSName)
	cancel()
	if err != nil || len(addrs) == 0 {
		c.OK = true
		c.Detail = fmt.Sprintf("%s does not resolve (%s)", cfg.DNSName, shortErr(err))
		return c
	}
	for _, a := range addrs {
		target := net.JoinHostPort(a, "443")
		dctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		conn, err := cfg.Dial(dctx, "tcp", target)
		cancel()
		if err == nil {
			_ = conn.Close()
			c.Detail = fmt.Sprintf("%s resolves to %s and it is reachable directly", cfg.DNSName, a)
			return c
		}
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s resolves (%d addresses) but none is reachable directly", cfg.DNSName, len(addrs))
	return c
}

// checkProxy sends CONNECT requests to the gateway's egress proxy.
func checkProxy(ctx context.Context, cfg Config) []Check {
	c := Check{Name: "egress proxy"}
	if cfg.ProxyURL == "" {
		c.Detail = "HTTPS_PROXY is not set: the agent has no way out through the gateway"
		return []Check{c}
	}
	u, err := url.Parse(cfg.ProxyURL)
	if err != nil || u.Host == "" {
		c.Detail = "HTTPS_PROXY is not a URL"
		return []Check{c}
	}
	shown := u.Redacted()
	code, status, err := connect(ctx, cfg, u, cfg.UnlistedHost)
	switch {
	case err != nil:
		c.Detail = fmt.Sprintf("%s did not answer: %s", shown, shortErr(err))
		return []Check{c}
	case code == http.StatusOK:
		c.Detail = fmt.Sprintf("%s let an unlisted host through (%s)", shown, cfg.UnlistedHost)
		return []Check{c}
	case code == http.StatusProxyAuthRequired:
		c.Detail = fmt.Sprintf("%s refused the agent token (%s)", shown, status)
		return []Check{c}
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s answered and refused unlisted %s (%s)", shown, cfg.UnlistedHost, status)
	checks := []Check{c}
	if cfg.AllowedHost != "" {
		a := Check{Name: "proxy allowlist"}
		code, status, err := connect(ctx, cfg, u, cfg.AllowedHost)
		switch {
		case err != nil:
			a.Detail = fmt.Sprintf("CONNECT %s failed: %s", cfg.AllowedHost, shortErr(err))
		case code != http.StatusOK:
			a.Detail = fmt.Sprintf("CONNECT %s refused (%s)", cfg.AllowedHost, status)
		default:
			a.OK = true
			a.Detail = fmt.Sprintf("CONNECT %s allowed", cfg.AllowedHost)
		}
		checks = append(checks, a)
	}
	return checks
}

// connect sends one CONNECT and returns the proxy's status.
func connect(ctx context.Context, cfg Config, proxy *url.URL, target string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	host := proxy.Host
	if proxy.Port() == "" {
		host = net.JoinHostPort(proxy.Hostname(), "3128")
	}
	conn, err := cfg.Dial(ctx, "tcp", host)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if proxy.User != nil {
		pass, _ := proxy.User.Password()
		cred := base64.StdEncoding.EncodeToString([]byte(proxy.User.Username() + ":" + pass))
		req += "Proxy-Authorization: Basic " + cred + "\r\n"
	}
	req += "\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return 0, "", fmt.Errorf("writing CONNECT: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, "", fmt.Errorf("reading the proxy's answer: %w", err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Status, nil
}

func checkMCP(ctx context.Context, cfg Config) Check {
	c := Check{Name: "mcp endpoint"}
	if cfg.CheckMCP == nil {
		c.Detail = "no MCP endpoint configured (IRONCURTAIN_MCP_URL)"
		return c
	}
	mctx, cancel := context.WithTimeout(ctx, 4*cfg.Timeout)
	defer cancel()
	n, err := cfg.CheckMCP(mctx)
	if err != nil {
		c.Detail = "initialize/tools/list failed: " + shortErr(err)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("initialize and tools/list answered: %d tools", n)
	return c
}

// agentTokenVar is the one token the agent holds; it is worthless outside
// the gateway (it only names the session there).
const agentTokenVar = "IRONCURTAIN_AGENT_TOKEN"

var (
	credentialName   = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH|(^|_)KEY($|_)|COOKIE|SESSION_?ID)`)
	credentialPrefix = []string{"AWS_", "GITHUB_", "GH_", "GITLAB_", "GOOGLE_", "GCLOUD_", "GCP_", "AZURE_", "ANTHROPIC_",
		"OPENAI_", "HF_", "HUGGING", "NPM_", "DOCKER_", "VAULT_", "SSH_AUTH_SOCK", "KUBECONFIG", "CLOUDSDK_", "DIGITALOCEAN_", "CLOUDFLARE_"}
	// credentialValue matches values shaped like well-known secrets.
	credentialValue = regexp.MustCompile(`(sk-ant-[A-Za-z0-9_-]{10,}|sk-(proj-)?[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|AIza[0-9A-Za-z_-]{30,})`)
)

// checkEnv flags credential-like variables by name or value. Values are
// never printed.
func checkEnv(environ []string) Check {
	c := Check{Name: "credential env vars"}
	var flagged []string
	agentToken := false
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if name == agentTokenVar {
			agentToken = true
			continue
		}
		upper := strings.ToUpper(name)
		suspicious := credentialName.MatchString(upper) || credentialValue.MatchString(value)
		for _, p := range credentialPrefix {
			if strings.HasPrefix(upper, p) {
				suspicious = true
			}
		}
		if suspicious {
			flagged = append(flagged, name)
		}
	}
	sort.Strings(flagged)
	note := ""
	if agentToken {
		note = "; " + agentTokenVar + " is set: it only names this session to the gateway and is worthless outside it"
	}
	if len(flagged) > 0 {
		c.Detail = "credential-like variables present: " + strings.Join(flagged, ", ") + note
		return c
	}
	c.OK = true
	c.Detail = "none" + note
	return c
}

// credentialFiles are looked for under the home directory.
var credentialFiles = []string{
	".ssh/id_*", ".ssh/*.pem", ".git-credentials", ".config/git/credentials", ".config/gh/hosts.yml",
	".netrc", ".aws/credentials", ".aws/config", ".docker/config.json", ".kube/config",
	".config/gcloud/credentials.db", ".config/gcloud/application_default_credentials.json",
	".npmrc", ".pypirc", ".gnupg/private-keys-v1.d", ".anthropic", ".config/anthropic", ".openai",
	".azure/accessTokens.json", ".config/hub",
}

// systemCredentialFiles are absolute paths that must not exist either.
var systemCredentialFiles = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/run/secrets", "/var/run/secrets/kubernetes.io",
	"/root/.ssh", "/root/.git-credentials", "/root/.aws/credentials", "/root/.docker/config.json",
}

func checkFiles(home, root string, extra []string) Check {
	c := Check{Name: "credential files"}
	var patterns []string
	if home != "" {
		for _, p := range credentialFiles {
			patterns = append(patterns, filepath.Join(home, p))
		}
	}
	if root == "" {
		root = "/"
	}
	for _, p := range systemCredentialFiles {
		patterns = append(patterns, filepath.Join(root, p))
	}
	patterns = append(patterns, extra...)
	seen := map[string]bool{}
	var found []string
	for _, p := range patterns {
		matches, err := filepath.Glob(p)
		if err != nil {
			continue
		}
		for _, m := range matches {
			if seen[m] || !present(m) {
				continue
			}
			seen[m] = true
			found = append(found, m)
		}
	}
	sort.Strings(found)
	if len(found) > 0 {
		c.Detail = "credential-like files present: " + strings.Join(found, ", ")
		return c
	}
	c.OK = true
	c.Detail = "none found"
	return c
}

// present reports whether path exists (an empty directory does not count).
func present(path string) bool {
	st, err := os.Lstat(path)
	if err != nil {
		return false
	}
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		return err != nil || len(entries) > 0
	}
	return true
}

func shortErr(err error) string {
	if err == nil {
		return "no addresses"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.Err
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
