// Package gitmirror keeps the gateway-private bare mirrors in which every
// git network operation runs, and the credentials only they use: the git
// server fetches, clones and pushes through a workspace repository's
// mirror, and the git smart HTTP door serves and pushes through an
// upstream's mirror (UpstreamMirror). Nothing in a mirror is
// agent-writable; credentials reach git only here, through a credential
// helper script that reads the token when git asks.
package gitmirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"ironcurtain.dev/gateway/gitexec"
)

// Credentials are the gateway's secrets for git remotes.
type Credentials struct {
	// TokenFile holds an HTTPS token (GITHUB_TOKEN). It is read by the
	// credential helper at each use, never by the mirrors into memory
	// except to redact it from output.
	TokenFile string
	// Token is the token itself, for a gateway that receives it in its
	// environment: New writes it to a 0600 file in the mirror directory and
	// uses that as TokenFile. Set at most one of Token and TokenFile.
	Token string
	// TokenUser is the user name sent with the token (default
	// "x-access-token").
	TokenUser string
	// TokenHosts are the hosts (host or host:port, as git reports them) the
	// token is given to. Default github.com.
	TokenHosts []string
	// SSHKeyFile is the private key for ssh remotes.
	SSHKeyFile string
	// SSHKnownHostsFile pins the ssh host keys; without it every ssh remote
	// fails host key checking.
	SSHKnownHostsFile string
}

// Config configures the mirrors. The git server validates Dir (absolute,
// private, apart from the sandbox) and fills in the defaults.
type Config struct {
	// Dir is the canonical mirror directory.
	Dir string
	// Sandbox is the canonical sandbox: no credential file may lie in it.
	Sandbox     string
	Credentials Credentials
	// Timeout bounds local git commands in a mirror, NetworkTimeout
	// fetches and pushes.
	Timeout, NetworkTimeout time.Duration
	// MaxOutput caps the output of one git command.
	MaxOutput int
	// Git is the git binary.
	Git string
	// UnsafeAllowLocal (tests only) allows the file transport and local
	// upstreams.
	UnsafeAllowLocal bool
	// UnsafeTestCAFile (tests only) is a CA bundle git trusts for HTTPS.
	UnsafeTestCAFile string
}

// Mirrors are the mirrors in one directory. They are safe for concurrent
// use; operations on one mirror are serialised with Lock.
type Mirrors struct {
	dir          string
	sandbox      string
	creds        Credentials
	helperPath   string // credential helper script, "" without a token
	timeout      time.Duration
	netTimeout   time.Duration
	maxOutput    int
	git          string
	unsafeLocal  bool
	unsafeTestCA string

	locksMu sync.Mutex
	locks   map[string]*sync.Mutex
}

// New validates the credentials and writes the credential helper into
// c.Dir.
func New(c Config) (*Mirrors, error) {
	m := &Mirrors{dir: c.Dir, sandbox: c.Sandbox, creds: c.Credentials, timeout: c.Timeout, netTimeout: c.NetworkTimeout,
		maxOutput: c.MaxOutput, git: c.Git, unsafeLocal: c.UnsafeAllowLocal, unsafeTestCA: c.UnsafeTestCAFile,
		locks: map[string]*sync.Mutex{}}
	if err := m.setupCredentials(); err != nil {
		return nil, err
	}
	return m, nil
}

// Dir is the mirror directory.
func (s *Mirrors) Dir() string { return s.dir }

// Credentials returns the credentials in use: a Token given to New is
// then a TokenFile, and the defaults are filled in.
func (s *Mirrors) Credentials() Credentials { return s.creds }

// File names in the mirror directory: the credential helper script and
// the token written from Credentials.Token.
const (
	CredentialHelperName = "credential-helper"
	TokenFileName        = "token"
)

// writePrivate writes a 0600 file atomically.
func writePrivate(path string, data []byte) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// safeScriptPath matches the paths the helper script and GIT_SSH_COMMAND
// embed (they are read by a shell).
func safeScriptPath(p string) bool {
	if p == "" || !filepath.IsAbs(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._-+@", c) >= 0) {
			return false
		}
	}
	return true
}

// safeHost matches a host or host:port as git passes it to a helper.
func safeHost(h string) bool {
	if h == "" || len(h) > 255 || h[0] == '-' {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte(".-:[]", c) >= 0) {
			return false
		}
	}
	return true
}

// setupCredentials validates the credential settings and writes the
// credential helper into the mirror directory.
//
// The helper is a small POSIX shell script that git runs for "get": it
// answers only when the protocol is https and the host is one of
// TokenHosts, reading the token from TokenFile at that moment. The token
// never enters git's argv or environment, and the script passes it to
// printf, a shell builtin, so no process ever carries it in argv either.
func (s *Mirrors) setupCredentials() error {
	c := &s.creds
	if c.Token != "" {
		if c.TokenFile != "" {
			return errors.New("configuring git server: set Credentials.Token or Credentials.TokenFile, not both")
		}
		if strings.ContainsAny(c.Token, "\n\r\x00 ") {
			return errors.New("configuring git server: Credentials.Token contains whitespace or control characters")
		}
		f := filepath.Join(s.dir, TokenFileName)
		if err := writePrivate(f, []byte(c.Token+"\n")); err != nil {
			return fmt.Errorf("writing git token file: %w", err)
		}
		c.TokenFile, c.Token = f, ""
	}
	for name, p := range map[string]string{"TokenFile": c.TokenFile, "SSHKeyFile": c.SSHKeyFile, "SSHKnownHostsFile": c.SSHKnownHostsFile} {
		if p != "" && !safeScriptPath(p) {
			return fmt.Errorf("configuring git server: Credentials.%s %q must be an absolute path of letters, digits and ./_-+@", name, p)
		}
		if p != "" && s.sandbox != "" && within(s.sandbox, p) {
			return fmt.Errorf("configuring git server: Credentials.%s must not be inside the sandbox", name)
		}
	}
	if c.TokenUser == "" {
		c.TokenUser = "x-access-token"
	}
	if !safeHost(strings.ToLower(c.TokenUser)) || strings.ContainsAny(c.TokenUser, ":[]") {
		return fmt.Errorf("configuring git server: Credentials.TokenUser %q is not a plain user name", c.TokenUser)
	}
	if len(c.TokenHosts) == 0 {
		c.TokenHosts = []string{"github.com"}
	}
	for i, h := range c.TokenHosts {
		if !safeHost(h) {
			return fmt.Errorf("configuring git server: Credentials.TokenHosts[%d] %q is not a host name", i, h)
		}
	}
	if c.TokenFile == "" {
		return nil
	}
	if !safeScriptPath(s.dir) {
		return fmt.Errorf("configuring git server: MirrorDir %q must be a path of letters, digits and ./_-+@ (it holds the credential helper)", s.dir)
	}
	var cases []string
	for _, h := range c.TokenHosts {
		cases = append(cases, "'"+h+"'")
	}
	script := "#!/bin/sh\n" +
		"# Written by the IronCurtain gateway. git runs it in gateway-private mirrors only:\n" +
		"# it gives the gateway token for https and the listed hosts, and nothing else.\n" +
		"test \"$1\" = get || exit 0\n" +
		"proto=\nhost=\n" +
		"while IFS= read -r line; do\n" +
		"\ttest -n \"$line\" || break\n" +
		"\tcase $line in\n" +
		"\tprotocol=*) proto=${line#protocol=} ;;\n" +
		"\thost=*) host=${line#host=} ;;\n" +
		"\tesac\n" +
		"done\n" +
		"test \"$proto\" = https || exit 0\n" +
		"case $host in\n" +
		strings.Join(cases, "|") + ") ;;\n" +
		"*) exit 0 ;;\n" +
		"esac\n" +
		"token=$(cat '" + c.TokenFile + "' 2>/dev/null) || exit 0\n" +
		"test -n \"$token\" || exit 0\n" +
		"printf 'username=%s\\npassword=%s\\n' '" + c.TokenUser + "' \"$token\"\n"
	path := filepath.Join(s.dir, CredentialHelperName)
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, []byte(script), 0o700); err != nil {
		return fmt.Errorf("writing git credential helper: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing git credential helper: %w", err)
	}
	s.helperPath = path
	return nil
}

// currentToken reads the token (for redaction only).
func (s *Mirrors) currentToken() string {
	if s.creds.TokenFile == "" {
		return ""
	}
	b, err := os.ReadFile(s.creds.TokenFile)
	if err != nil {
		return ""
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 8 { // too short to redact without mangling output
		return ""
	}
	return tok
}

// sshCommand is GIT_SSH_COMMAND for the mirror: only the gateway's key and
// known hosts, strict host key checking, no agent, no proxy, no config file.
func (s *Mirrors) sshCommand() string {
	key := "none"
	if s.creds.SSHKeyFile != "" {
		key = "'" + s.creds.SSHKeyFile + "'"
	}
	known := "/dev/null"
	if s.creds.SSHKnownHostsFile != "" {
		known = "'" + s.creds.SSHKnownHostsFile + "'"
	}
	return "ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes" +
		" -o UserKnownHostsFile=" + known + " -o GlobalKnownHostsFile=/dev/null" +
		" -o IdentitiesOnly=yes -o IdentityFile=" + key + " -o IdentityAgent=none" +
		" -o ProxyCommand=none -o ProxyJump=none -o PermitLocalCommand=no" +
		" -o ControlMaster=no -o ControlPath=none -o UpdateHostKeys=no" +
		" -o ForwardAgent=no -o ForwardX11=no -o ClearAllForwardings=yes" +
		" -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no"
}

// For returns the mirror directory of a workspace repository (keyed by its
// common directory, so clone and later fetches share it).
func (s *Mirrors) For(commonDir string) string {
	sum := sha256.Sum256([]byte(commonDir))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+".git")
}

// Lock serialises the operations on one mirror; call the result to unlock.
func (s *Mirrors) Lock(path string) func() {
	s.locksMu.Lock()
	mu := s.locks[path]
	if mu == nil {
		mu = &sync.Mutex{}
		s.locks[path] = mu
	}
	s.locksMu.Unlock()
	mu.Lock()
	return mu.Unlock
}

// Ensure creates the bare mirror at path if it does not exist.
func (s *Mirrors) Ensure(ctx context.Context, path string) error {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.IsDir():
		if _, err := os.Stat(filepath.Join(path, "HEAD")); err == nil {
			return nil
		}
	case err == nil:
		return fmt.Errorf("mirror %s is not a directory", path)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("checking mirror: %w", err)
	default:
		if err := os.Mkdir(path, 0o700); err != nil {
			return fmt.Errorf("creating mirror: %w", err)
		}
	}
	o := s.Options(path)
	o.Timeout = s.timeout
	if _, err := gitexec.Run(ctx, o, "init", "--bare", "--quiet"); err != nil {
		return fmt.Errorf("initialising mirror: %w", err)
	}
	return nil
}

// Options runs git in a mirror: the gateway's own repository, where (and
// only where) credentials are available.
func (s *Mirrors) Options(path string) gitexec.Options {
	cfg := []string{
		"init.templateDir=",
		"gc.auto=0",
		"maintenance.auto=false",
		"transfer.fsckObjects=true",
		"http.followRedirects=false",
		"credential.useHttpPath=false",
		"core.attributesFile=/dev/null",
		"core.excludesFile=/dev/null",
	}
	if s.helperPath != "" {
		cfg = append(cfg, "credential.helper="+s.helperPath)
	}
	if s.unsafeTestCA != "" {
		cfg = append(cfg, "http.sslCAInfo="+s.unsafeTestCA)
	}
	if s.unsafeLocal {
		cfg = append(cfg, "protocol.file.allow=always")
	}
	return gitexec.Options{
		GitDir:    path,
		Dir:       path,
		Timeout:   s.netTimeout,
		MaxOutput: s.maxOutput,
		Git:       s.git,
		Config:    cfg,
		Env:       []string{"GIT_SSH_COMMAND=" + s.sshCommand(), "GIT_SSH_VARIANT=ssh"},
	}
}

// LocalTransfer adds what a fetch between a workspace and a mirror needs:
// the file transport for this one command, and both repositories as safe
// directories (they may have different owners).
func LocalTransfer(o gitexec.Options, dirs ...string) gitexec.Options {
	o.Config = append(append([]string(nil), o.Config...), "protocol.file.allow=always")
	for _, d := range dirs {
		o.Config = append(o.Config, "safe.directory="+d)
	}
	return o
}

// Redact removes the mirror directory, the credential files' paths and the
// token from text shown to the agent or logged.
func (s *Mirrors) Redact(text string) string {
	if s.dir != "" {
		text = strings.ReplaceAll(text, s.dir, "<gateway-mirror>")
	}
	for _, p := range []string{s.creds.TokenFile, s.creds.SSHKeyFile, s.creds.SSHKnownHostsFile} {
		if p != "" {
			text = strings.ReplaceAll(text, p, "<gateway-secret>")
		}
	}
	if tok := s.currentToken(); tok != "" {
		text = strings.ReplaceAll(text, tok, "<redacted>")
	}
	return text
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	if p == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, root+"/")
}
