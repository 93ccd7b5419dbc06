package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/testenv"
)

// The Compose profile `observability` (compose/observability/docker-compose.yml,
// added after compose/docker-compose.yml): Prometheus and Grafana on the
// operator's side only. The metrics themselves are checked against a live
// gateway in gateway/cmd/ironcurtain (serve_metrics_test.go).
const (
	obsCompose    = "compose/observability/docker-compose.yml"
	obsPrometheus = "compose/observability/prometheus/prometheus.yml"
)

func TestObservabilityProfileIsolation(t *testing.T) {
	var o struct {
		Services map[string]composeService `yaml:"services"`
		Networks map[string]any            `yaml:"networks"`
	}
	decodeYAML(t, obsCompose, &o)
	if len(o.Networks) > 0 {
		t.Errorf("%s declares networks %v: it joins the stack's ops_net only", obsCompose, o.Networks)
	}
	for _, name := range []string{"prometheus", "grafana"} {
		if _, ok := o.Services[name]; !ok {
			t.Fatalf("%s has no %s service", obsCompose, name)
		}
	}
	published := regexp.MustCompile(`^127\.0\.0\.1:(\$\{[^}]*\}|\d+):\d+$`)
	for name, s := range o.Services {
		t.Run(name, func(t *testing.T) {
			if len(s.Profiles) != 1 || s.Profiles[0] != "observability" {
				t.Errorf("profiles %v, want [observability] (plain `up` must not start it)", s.Profiles)
			}
			nets := s.networks(t)
			if len(nets) != 1 {
				t.Errorf("networks %v, want ops_net only", nets)
			}
			if _, ok := nets["ops_net"]; !ok {
				t.Errorf("networks %v, want ops_net only (never agent_net or db_net)", nets)
			}
			for _, p := range s.Ports {
				ps, _ := p.(string)
				if !published.MatchString(ps) {
					t.Errorf("port %v is not published on 127.0.0.1 only", p)
				}
			}
			if s.NetworkMode != "" || s.Pid != "" || s.Ipc != "" || s.Privileged || len(s.CapAdd) > 0 {
				t.Errorf("sets network_mode/pid/ipc/privileged/cap_add")
			}
			for _, v := range s.Volumes {
				src, _, _ := strings.Cut(v.(string), ":")
				if strings.HasPrefix(src, "/") || strings.Contains(src, "docker.sock") {
					t.Errorf("volume %v mounts a host path outside the repository", v)
				}
				if strings.HasPrefix(src, "./") {
					// Relative to compose/, the first Compose file's folder.
					if _, err := os.Stat(repoPath(filepath.ToSlash(filepath.Join("compose", src)))); err != nil {
						t.Errorf("volume %v: %v", v, err)
					}
				}
			}
			for k, v := range s.environment(t) {
				for _, ref := range varRefs(v) {
					t.Errorf("%s takes ${%s}: the profile's secrets are files (the metrics token for Prometheus, never the operator token; its own password for Grafana)", k, ref)
				}
			}
			want := map[string][]string{"prometheus": {"metrics_token"}, "grafana": {"grafana_admin_password"}}[name]
			if got := s.secretNames(t); !reflect.DeepEqual(got, want) {
				t.Errorf("secrets %v, want %v (the metrics token for Prometheus, never the operator token; its own password for Grafana)", got, want)
			}
		})
	}

	// Prometheus scrapes the ops API where the stack's gateway serves it.
	var p struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			Authorization struct {
				CredentialsFile string `yaml:"credentials_file"`
				Credentials     string `yaml:"credentials"`
			} `yaml:"authorization"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	decodeYAML(t, obsPrometheus, &p)
	_, _, ops := loadListeners(t, composeGateway)
	if len(p.ScrapeConfigs) != 1 || len(p.ScrapeConfigs[0].StaticConfigs) != 1 {
		t.Fatalf("%s: want one scrape config with one static target group", obsPrometheus)
	}
	sc := p.ScrapeConfigs[0]
	if got := sc.StaticConfigs[0].Targets; len(got) != 1 || got[0] != ops.Host+":"+strconv.Itoa(ops.Port) {
		t.Errorf("%s scrapes %v, want the gateway's ops listener %s:%d", obsPrometheus, got, ops.Host, ops.Port)
	}
	if sc.Authorization.Credentials != "" || sc.Authorization.CredentialsFile == "" {
		t.Errorf("%s: the metrics token must come from a file, never the config", obsPrometheus)
	}
}

// TestObservabilityProfileConfigAccepted: Compose accepts the stack with the
// profile's file added after it (the command docs/observability.md gives).
func TestObservabilityProfileConfigAccepted(t *testing.T) {
	var tool []string
	if exec.Command("docker", "compose", "version").Run() == nil {
		tool = []string{"docker", "compose"}
	} else if p, err := exec.LookPath("docker-compose"); err == nil {
		tool = []string{p}
	} else {
		testenv.Missing(t, "neither docker compose nor docker-compose is installed")
	}
	env := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(env, []byte("IRONCURTAIN_OPS_PORT=8081\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(append([]string{}, tool[1:]...), "-p", composeProject, "--env-file", env,
		"-f", repoPath(composeFile), "-f", repoPath(obsCompose), "--profile", "observability", "config")
	out, err := exec.CommandContext(ctx, tool[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s config with the observability profile: %v\n%s", strings.Join(tool, " "), err, out)
	}
	// The relative paths resolve under compose/ (the first file's folder).
	for _, rel := range []string{"compose/observability/prometheus/prometheus.yml", "compose/observability/grafana/dashboards"} {
		want, err := filepath.Abs(repoPath(rel))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), want+":") {
			t.Errorf("the merged configuration does not mount %s:\n%s", want, out)
		}
	}
}
