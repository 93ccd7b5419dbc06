package deploy

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// secretRef is a ${VAR} whose name says it holds a secret.
var secretRef = regexp.MustCompile(`(?i)(TOKEN|KEY|PASSWORD|SECRET|DATABASE_URL|CREDENTIAL)`)

// secretValue is a value that looks like a credential itself: the stack's
// generated tokens, common API key and GitHub token shapes, a URL with a
// password, or a long random-looking string.
var secretValue = regexp.MustCompile(`ic-(agent|operator|metrics)-|\bsk-[A-Za-z0-9_-]{8,}|\bgh[pousr]_[A-Za-z0-9]{8,}|://[^/@\s:]*:[^/@\s]+@|[A-Za-z0-9+=_-]{32,}`)

// TestComposeSecretsAreFiles: in every Compose file of the repository (the
// stack, the servers override, the observability profile, the agent
// overrides) no service's environment holds a secret, by value or by
// ${...} reference, so `docker inspect` of any container shows none. A
// variable may only name a secret file under /run/secrets/ (VAR_FILE,
// VAR__FILE) or, for the agent shell, the variables its entrypoint sets
// from the token file (IRONCURTAIN_AGENT_TOKEN_VARS). Every secret a
// service mounts is a file under compose/secrets/.
func TestComposeSecretsAreFiles(t *testing.T) {
	files := []string{composeFile, "compose/docker-compose.servers.yml", obsCompose}
	agents, err := filepath.Glob(repoPath("compose/agents/*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		files = append(files, "compose/agents/"+filepath.Base(a))
	}
	declared := map[string]string{} // secret → file, over all files (overrides add to the stack's)
	type fileSpec struct {
		Services map[string]composeService `yaml:"services"`
		Secrets  map[string]struct {
			File        string `yaml:"file"`
			Environment string `yaml:"environment"`
			External    any    `yaml:"external"`
		} `yaml:"secrets"`
	}
	specs := map[string]fileSpec{}
	for _, f := range files {
		var spec fileSpec
		decodeYAML(t, f, &spec)
		specs[f] = spec
		for name, s := range spec.Secrets {
			if s.Environment != "" || s.External != nil || !strings.HasPrefix(s.File, "./secrets/") {
				t.Errorf("%s: secret %s must be a file under ./secrets/ (compose/secrets/, written by make up)", f, name)
			}
			declared[name] = s.File
		}
	}
	checked := 0
	for _, f := range files {
		for name, s := range specs[f].Services {
			checked += checkServiceSecrets(t, f, name, s, declared)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d environment entries checked: the test would prove nothing", checked)
	}
	// The stack's services get what each needs and nothing more.
	stack := specs[composeFile].Services
	want := map[string][]string{
		"postgres": {"postgres_password"},
		"migrate":  {"database_url"},
		"gateway":  {"agent_token", "anthropic_api_key", "database_url", "github_token", "metrics_token", "openai_api_key", "operator_token"},
	}
	for svc, w := range want {
		if got := stack[svc].secretNames(t); strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("%s mounts the secrets %v, want %v", svc, got, w)
		}
	}
}

// TestComposeSecretFilesMatchStackScript: every secret file the Compose
// files name is one compose/stack.sh env writes, so `make up` on a fresh
// clone has them all.
func TestComposeSecretFilesMatchStackScript(t *testing.T) {
	script := string(readFile(t, "compose/stack.sh"))
	for _, f := range []string{composeFile, obsCompose} {
		var spec struct {
			Secrets map[string]struct {
				File string `yaml:"file"`
			} `yaml:"secrets"`
		}
		decodeYAML(t, f, &spec)
		for name, s := range spec.Secrets {
			base := strings.TrimPrefix(s.File, "./secrets/")
			if !strings.Contains(script, "write_secret "+base+" ") {
				t.Errorf("%s: secret %s (%s) is not written by compose/stack.sh env", f, name, s.File)
			}
		}
	}
}

// checkServiceSecrets checks one service of file f (TestComposeSecretsAreFiles)
// and returns the number of environment entries it checked.
func checkServiceSecrets(t *testing.T, f, name string, s composeService, declared map[string]string) int {
	t.Helper()
	env := s.environment(t)
	for k, v := range env {
		switch {
		case k == "IRONCURTAIN_AGENT_TOKEN_VARS":
			if strings.Contains(v, "$") || secretValue.MatchString(v) {
				t.Errorf("%s: %s: %s must list variable names only", f, name, k)
			}
			continue
		case strings.HasSuffix(k, "_FILE") && secretRef.MatchString(k):
			if !strings.HasPrefix(v, "/run/secrets/") {
				t.Errorf("%s: %s: %s = %q is not a Compose secret file", f, name, k, v)
			}
			continue
		case secretRef.MatchString(k) || credentialNames.MatchString(k):
			t.Errorf("%s: %s: environment %s looks like a credential: mount it as a secret file", f, name, k)
		}
		for _, ref := range varRefs(v) {
			if secretRef.MatchString(ref) {
				t.Errorf("%s: %s: environment %s interpolates ${%s}", f, name, k, ref)
			}
		}
		if secretValue.MatchString(v) {
			t.Errorf("%s: %s: environment %s holds a secret-looking value", f, name, k)
		}
	}
	for _, part := range []yaml.Node{s.Command, s.Entrypoint} {
		for _, ref := range varRefs(nodeText(part)) {
			if secretRef.MatchString(ref) {
				t.Errorf("%s: %s: its command interpolates ${%s}", f, name, ref)
			}
		}
	}
	for _, sec := range s.secretNames(t) {
		if _, ok := declared[sec]; !ok {
			t.Errorf("%s: %s mounts secret %s, which no Compose file declares", f, name, sec)
		}
	}
	return len(env)
}
