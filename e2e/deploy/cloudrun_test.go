package deploy

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	cloudRunService = "compose/cloudrun/service.yaml"
	cloudRunGateway = "compose/cloudrun/gateway.yaml"
)

// The Knative Service model: only what the invariants need.
type knService struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []knContainer `yaml:"containers"`
				Volumes    []knVolume    `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type knContainer struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Ports []struct {
		ContainerPort int `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom      []any `yaml:"envFrom"`
	VolumeMounts []struct {
		Name string `yaml:"name"`
	} `yaml:"volumeMounts"`
	StartupProbe *struct{} `yaml:"startupProbe"`
}

type knVolume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
}

func loadCloudRun(t *testing.T) (knService, map[string]knContainer) {
	t.Helper()
	var s knService
	decodeYAML(t, cloudRunService, &s)
	if s.APIVersion != "serving.knative.dev/v1" || s.Kind != "Service" {
		t.Fatalf("%s is %s %s, want a serving.knative.dev/v1 Service", cloudRunService, s.APIVersion, s.Kind)
	}
	byName := map[string]knContainer{}
	for _, c := range s.Spec.Template.Spec.Containers {
		byName[c.Name] = c
	}
	for _, n := range []string{"gateway", "agent"} {
		if _, ok := byName[n]; !ok {
			t.Fatalf("%s has no %s container", cloudRunService, n)
		}
	}
	return s, byName
}

func TestCloudRunIngressIsTheGatewayAgentAPI(t *testing.T) {
	s, _ := loadCloudRun(t)
	agentAPI, egress, ops := loadListeners(t, cloudRunGateway)
	var ingress []knContainer
	for _, c := range s.Spec.Template.Spec.Containers {
		if len(c.Ports) > 0 {
			ingress = append(ingress, c)
		}
	}
	if len(ingress) != 1 || ingress[0].Name != "gateway" {
		t.Fatalf("ingress containers %v, want exactly the gateway", ingress)
	}
	if p := ingress[0].Ports; len(p) != 1 || p[0].ContainerPort != agentAPI.Port {
		t.Errorf("the gateway's ingress ports %v, want only the agent API port %d", p, agentAPI.Port)
	}
	if ingress[0].Ports[0].ContainerPort == ops.Port {
		t.Errorf("the ops API is the ingress port")
	}
	if !isWildcard(agentAPI.Host) {
		t.Errorf("agent.listen host %q: Cloud Run reaches the ingress port on the instance's interface", agentAPI.Host)
	}
	if !isLoopback(ops.Host) {
		t.Errorf("ops.listen %q is not loopback: the ops API must not be reachable from outside the instance", ops.Host)
	}
	if !isLoopback(egress.Host) {
		t.Errorf("egress.listen %q is not loopback", egress.Host)
	}
	if got := s.Metadata.Annotations["run.googleapis.com/ingress"]; got != "internal" {
		t.Errorf("run.googleapis.com/ingress = %q, want internal", got)
	}
}

func TestCloudRunSecretsOnlyInTheGateway(t *testing.T) {
	s, byName := loadCloudRun(t)
	secretVolumes := map[string]bool{}
	for _, v := range s.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secretVolumes[v.Name] = true
		}
	}
	gatewaySecrets := 0
	for _, c := range s.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				if c.Name != "gateway" {
					t.Errorf("container %s: %s comes from secret %s", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name)
				}
				gatewaySecrets++
			}
		}
		if c.Name == "gateway" {
			continue
		}
		if len(c.EnvFrom) > 0 {
			t.Errorf("container %s uses envFrom", c.Name)
		}
		for _, m := range c.VolumeMounts {
			if secretVolumes[m.Name] {
				t.Errorf("container %s mounts the secret volume %s", c.Name, m.Name)
			}
		}
	}
	if gatewaySecrets == 0 {
		t.Errorf("the gateway references no secret: the check would prove nothing")
	}
	if n := len(byName["agent"].VolumeMounts); n > 0 {
		t.Errorf("the agent mounts %d volumes; it acts only through the gateway", n)
	}
	for _, e := range byName["agent"].Env {
		if credentialNames.MatchString(e.Name) {
			t.Errorf("the agent has %s", e.Name)
		}
		for _, ref := range varRefs(e.Value) {
			if ref != "AGENT_TOKEN" {
				t.Errorf("the agent's %s takes the deploy-time value ${%s}", e.Name, ref)
			}
		}
	}
}

func TestCloudRunAgentPointsAtTheGateway(t *testing.T) {
	_, byName := loadCloudRun(t)
	env := map[string]string{}
	for _, e := range byName["agent"].Env {
		env[e.Name] = e.Value
	}
	agentAPI, egress, _ := loadListeners(t, cloudRunGateway)
	// One network namespace per instance: the gateway is localhost.
	checkGatewayURLs(t, "the agent", env, agentGatewayURLs(agentAPI, egress), isLoopback, "the gateway on localhost")
}

func TestCloudRunStartOrder(t *testing.T) {
	s, byName := loadCloudRun(t)
	raw := s.Spec.Template.Metadata.Annotations["run.googleapis.com/container-dependencies"]
	var deps map[string][]string
	if err := json.Unmarshal([]byte(raw), &deps); err != nil {
		t.Fatalf("run.googleapis.com/container-dependencies %q: %v", raw, err)
	}
	if !contains(deps["agent"], "gateway") {
		t.Errorf("the agent does not depend on the gateway: %v", deps)
	}
	if len(deps["gateway"]) > 0 {
		t.Errorf("the gateway depends on %v", deps["gateway"])
	}
	if byName["gateway"].StartupProbe == nil {
		t.Errorf("the gateway has no startup probe: the dependency would not wait for it")
	}
}

func TestCloudRunDatabaseAndEgress(t *testing.T) {
	s, _ := loadCloudRun(t)
	a := s.Spec.Template.Metadata.Annotations
	if strings.TrimSpace(a["run.googleapis.com/cloudsql-instances"]) == "" {
		t.Errorf("no Cloud SQL instance (run.googleapis.com/cloudsql-instances)")
	}
	if got := a["run.googleapis.com/vpc-access-egress"]; got != "all-traffic" {
		t.Errorf("run.googleapis.com/vpc-access-egress = %q, want all-traffic (README: Egress)", got)
	}
	var nics []map[string]any
	if err := json.Unmarshal([]byte(a["run.googleapis.com/network-interfaces"]), &nics); err != nil || len(nics) != 1 {
		t.Errorf("run.googleapis.com/network-interfaces %q: want one Direct VPC egress interface (%v)", a["run.googleapis.com/network-interfaces"], err)
	}
}
