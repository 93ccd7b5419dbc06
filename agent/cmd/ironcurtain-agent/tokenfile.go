package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// envTokenFile names a file holding the agent token (a Compose or
// Kubernetes secret), so that the token appears in no container
// configuration: at start the runner reads it into IRONCURTAIN_AGENT_TOKEN
// and adds it as the password (user "agent") of the proxy URLs that carry
// no credentials.
const envTokenFile = "IRONCURTAIN_AGENT_TOKEN_FILE"

// proxyVars are the proxy variables that get the token as their password.
var proxyVars = []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"}

// applyTokenFile builds the environment from envTokenFile when it is set.
// Errors never include the token.
func applyTokenFile(getenv func(string) string, setenv func(k, v string) error) error {
	path := getenv(envTokenFile)
	if path == "" {
		return nil
	}
	if getenv(envToken) != "" {
		return fmt.Errorf("%s and %s are both set: use one", envToken, envTokenFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the agent token (%s): %w", envTokenFile, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, "\r\n\x00") {
		return fmt.Errorf("%s: %s holds no single-line token", envTokenFile, path)
	}
	if err := setenv(envToken, token); err != nil {
		return fmt.Errorf("setting %s: %w", envToken, err)
	}
	for _, name := range proxyVars {
		v := getenv(name)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			return errors.New(name + " is not a proxy URL")
		}
		if u.User != nil {
			continue // credentials given: left alone
		}
		u.User = url.UserPassword("agent", token)
		if err := setenv(name, u.String()); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}
