package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"ironcurtain.dev/gateway/catalog"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
)

// Headers a url: server's configuration may not set: the MCP client sets
// them itself (a configured value would break or hijack the session).
var reservedRemoteHeaders = map[string]bool{
	"Host": true, "Content-Type": true, "Content-Length": true, "Accept": true,
	"Connection": true, "Transfer-Encoding": true, "Mcp-Session-Id": true,
	"Mcp-Protocol-Version": true, "Last-Event-Id": true,
}

// remoteErrors checks the url: settings of server name (fields relative to
// servers.<name>).
//
//	servers:
//	  notes:
//	    url: https://notes.example.com/mcp
//	    bearer_token_file: /run/secrets/notes-token   # 0600, never shown to the agent
//	    headers:
//	      X-Api-Key: ${NOTES_API_KEY}                 # from the gateway's environment
//	    allowed_hosts: [notes.example.com]            # default: the URL's host
func (s ServerConfig) remoteErrors(name string) []*FieldError {
	var errs []*FieldError
	add := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	if s.Catalog != "" {
		switch {
		case !s.External():
			add("catalog", errors.New("is set but none of command, image and url is (the catalog annotates external servers)"))
		default:
			if _, err := catalogVersion(s.Catalog); err != nil {
				add("catalog", err)
			}
		}
	}
	if s.URL == "" {
		if len(s.Headers) > 0 {
			add("headers", errors.New("is set but url is not (only url: servers take headers)"))
		}
		if s.BearerTokenFile != "" {
			add("bearer_token_file", errors.New("is set but url is not (only url: servers take a bearer token)"))
		}
		if len(s.AllowedHosts) > 0 {
			add("allowed_hosts", errors.New("is set but url is not (only url: servers take allowed_hosts)"))
		}
		if len(s.UnsafeAllowAddresses) > 0 {
			add("unsafe_allow_addresses", errors.New("is set but url is not"))
		}
		return errs
	}
	switch {
	case s.Command != "":
		add("url", errors.New("is set together with command: a server is exactly one of a child process (command), a container (image) or a remote server (url)"))
	case s.Image != "":
		add("url", errors.New("is set together with image: a server is exactly one of a child process (command), a container (image) or a remote server (url)"))
	}
	if builtinServers[name] {
		add("url", fmt.Errorf("%q is a built-in server; give the external server another name", name))
	}
	if !externalNameRE.MatchString(name) || strings.Contains(name, "__") {
		add("", errors.New("an external server name uses lower-case letters, digits, '-' and single '_' (it prefixes the tool names as name__tool)"))
	}
	if u, err := s.RemoteURL(); err != nil {
		add("url", err)
	} else if u.Scheme == "http" && len(s.UnsafeAllowAddresses) == 0 {
		// The token and headers would cross the network in clear text.
		add("url", errors.New("http is only for a sidecar or an in-cluster server (with unsafe_allow_addresses); use https"))
	}
	for i, h := range s.AllowedHosts {
		if _, err := netpolicy.ParsePatterns([]string{h}); err != nil {
			add(fmt.Sprintf("allowed_hosts[%d]", i), err)
		}
	}
	for i, a := range s.UnsafeAllowAddresses {
		if _, err := parseUnsafePrefix(a); err != nil {
			add(fmt.Sprintf("unsafe_allow_addresses[%d]", i), err)
		}
	}
	if s.BearerTokenFile != "" && !strings.HasPrefix(s.BearerTokenFile, "/") {
		add("bearer_token_file", errors.New("must be an absolute path"))
	}
	for _, k := range sortedKeys(s.Headers) {
		v := s.Headers[k]
		field := "headers." + k
		switch {
		case !validHeaderName(k):
			add(field, errors.New("is not a valid HTTP header name"))
		case reservedRemoteHeaders[http.CanonicalHeaderKey(k)]:
			add(field, errors.New("is set by the gateway's MCP client and cannot be configured"))
		case http.CanonicalHeaderKey(k) == "Authorization" && s.BearerTokenFile != "":
			add(field, errors.New("is set together with bearer_token_file: use one"))
		}
		if strings.ContainsAny(v, "\x00\r\n") {
			add(field, errors.New("must not contain control characters"))
		}
		if strings.Contains(v, "${") && !envRefRE.MatchString(v) {
			add(field, errors.New(`a reference to the gateway's environment is the whole value, written ${NAME}`))
		}
	}
	return errs
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 0x7e || r <= 0x20 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// RemoteURL parses servers.<name>.url strictly (http or https, no userinfo:
// credentials go in bearer_token_file or headers, never in the URL).
func (s ServerConfig) RemoteURL() (netpolicy.URL, error) {
	u, err := netpolicy.ParseURL(s.URL)
	if err != nil {
		return netpolicy.URL{}, err
	}
	if u.RawQuery != "" {
		return netpolicy.URL{}, errors.New("must not carry a query (credentials go in bearer_token_file or headers)")
	}
	return u, nil
}

// RemoteAllowedHosts returns the hosts a url: server may be dialed at:
// allowed_hosts, or else the URL's host alone.
func (s ServerConfig) RemoteAllowedHosts() ([]netpolicy.Pattern, error) {
	hosts := s.AllowedHosts
	if len(hosts) == 0 {
		u, err := s.RemoteURL()
		if err != nil {
			return nil, err
		}
		hosts = []string{u.Host.String()}
	}
	return netpolicy.ParsePatterns(hosts)
}

// RemoteHeaders returns the headers to send to url: server name: literal
// values as written, ${NAME} values from the gateway's environment, and
// "Authorization: Bearer <token>" from bearer_token_file (read with
// ReadSecretFile). The values are secrets: errors name the field, never a
// value.
func (s ServerConfig) RemoteHeaders(name string, getenv func(string) string) (map[string]string, error) {
	out := make(map[string]string, len(s.Headers)+1)
	for _, k := range sortedKeys(s.Headers) {
		v := s.Headers[k]
		if m := envRefRE.FindStringSubmatch(v); m != nil {
			ref := getenv(m[1])
			if ref == "" {
				return nil, &FieldError{Field: "servers." + name + ".headers." + k, Err: fmt.Errorf("refers to $%s, which is not set in the gateway's environment", m[1])}
			}
			if strings.ContainsAny(ref, "\x00\r\n") {
				return nil, &FieldError{Field: "servers." + name + ".headers." + k, Err: fmt.Errorf("$%s contains control characters", m[1])}
			}
			v = ref
		}
		out[http.CanonicalHeaderKey(k)] = v
	}
	if s.BearerTokenFile != "" {
		tok, err := ReadSecretFile(s.BearerTokenFile)
		if err != nil {
			return nil, &FieldError{Field: "servers." + name + ".bearer_token_file", Err: err}
		}
		out["Authorization"] = "Bearer " + tok
	}
	return out, nil
}

// ErrSecretFileExposed is returned by ReadSecretFile for a secret file that
// others than its owner may read or write.
var ErrSecretFileExposed = errors.New("is readable or writable by group or others (chmod 600 it)")

// ReadSecretFile reads a one-line secret (a token) from path: surrounding
// white space is dropped; an empty file, a secret with control characters,
// and a file whose mode lets its group or others read or write it are
// refused (whatever the gateway starts, and any other local user, must not
// read the gateway's credentials). The error never carries the content.
func ReadSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading secret file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading secret file: %w", err)
	}
	if err := checkSecretMode(fi); err != nil {
		return "", err
	}
	b := make([]byte, 0, 256)
	buf := make([]byte, 4096)
	for {
		n, rerr := f.Read(buf)
		b = append(b, buf[:n]...)
		if len(b) > maxSecretFileBytes {
			return "", fmt.Errorf("reading secret file: longer than %d bytes", maxSecretFileBytes)
		}
		if rerr != nil {
			break
		}
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", errors.New("the secret file is empty")
	case strings.ContainsAny(tok, "\x00\r\n"):
		return "", errors.New("the secret file holds more than one line")
	}
	return tok, nil
}

// maxSecretFileBytes caps a secret file.
const maxSecretFileBytes = 64 << 10

// checkSecretMode refuses a non-regular file or one with group or other
// permission bits for reading or writing.
func checkSecretMode(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return errors.New("the secret file is not a regular file")
	}
	if fi.Mode().Perm()&0o066 != 0 {
		return fmt.Errorf("secret file mode %#o %w", fi.Mode().Perm(), ErrSecretFileExposed)
	}
	return nil
}

// catalogVersion looks a "name@version" reference up in the shipped
// catalog; the version is required, so that an upgrade of the gateway
// never changes a server's annotations unasked.
func catalogVersion(ref string) (*catalog.Version, error) {
	if !strings.Contains(ref, "@") {
		return nil, fmt.Errorf("%q: name the version, as name@version (ironcurtain servers add %s prints it)", ref, ref)
	}
	c, err := catalog.Shipped()
	if err != nil {
		return nil, err
	}
	_, v, err := c.Lookup(ref)
	return v, err
}

// CatalogAnnotations returns the catalog's annotations of the servers
// configured with catalog:, under their configured names (validated by
// Parse; a reference that does not resolve contributes nothing).
func (c *Config) CatalogAnnotations() []policy.ToolAnnotation {
	var out []policy.ToolAnnotation
	for _, name := range sortedKeys(c.Servers) {
		sc := c.Servers[name]
		if sc.Catalog == "" || !sc.External() {
			continue
		}
		v, err := catalogVersion(sc.Catalog)
		if err != nil {
			continue
		}
		out = append(out, v.Annotations(name)...)
	}
	return out
}

// SecretFileExposure is a configured secret file that its group or others
// may read or write.
type SecretFileExposure struct {
	Field string // "github.token_file", "ops.operator_token_files.alice"
	Path  string
	Mode  fs.FileMode
}

// ExposedSecretFiles returns the configured secret files (tokens, keys,
// the database URL) whose mode lets their group or others read or write
// them. The gateway warns about each at start rather than refusing them:
// Docker and Kubernetes mount secrets 0444/0644 by default, and the
// gateway's children run as its own user anyway (only a different uid, as
// in image: mode, or a mode of 0400/0600 keeps other local users out). The
// files new with url: servers and the spool key (bearer_token_file,
// audit.spool_key_file) are refused instead (ReadSecretFile). A file that
// cannot be stat'ed is left to the component that reads it.
func (c *Config) ExposedSecretFiles() []SecretFileExposure {
	files := map[string]string{
		"github.token_file":    c.GitHub.TokenFile,
		"git.token_file":       c.Git.TokenFile,
		"git.ssh_key_file":     c.Git.SSHKeyFile,
		"database.url_file":    c.Database.URLFile,
		"audit.spool_key_file": c.Audit.SpoolKeyFile,
	}
	for k, p := range c.Ops.OperatorTokenFiles {
		files["ops.operator_token_files."+k] = p
	}
	for k, p := range c.Ops.MetricsTokenFiles {
		files["ops.metrics_token_files."+k] = p
	}
	for k, p := range c.Agent.TokenFiles {
		files["agent.token_files."+k] = p
	}
	for name, sc := range c.Servers {
		files["servers."+name+".bearer_token_file"] = sc.BearerTokenFile
	}
	var out []SecretFileExposure
	for _, field := range sortedKeys(files) {
		p := files[field]
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if fi.Mode().Perm()&0o066 != 0 {
			out = append(out, SecretFileExposure{Field: field, Path: p, Mode: fi.Mode().Perm()})
		}
	}
	return out
}

// RemoteUnsafePrefixes returns servers.<name>.unsafe_allow_addresses
// (validated by Parse).
func (s ServerConfig) RemoteUnsafePrefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(s.UnsafeAllowAddresses))
	for i, a := range s.UnsafeAllowAddresses {
		p, err := parseUnsafePrefix(a)
		if err != nil {
			return nil, fmt.Errorf("unsafe_allow_addresses[%d]: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}
