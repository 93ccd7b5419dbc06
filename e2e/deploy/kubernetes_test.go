package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The Kubernetes manifests (compose/kubernetes, docs/kubernetes.md) are
// rendered here with the kustomize library, offline, exactly as
// `kubectl apply -k` would render them, and the rendered objects are checked:
// no cluster is needed (none can be started on the test machine).
const (
	k8sDir          = "compose/kubernetes"
	k8sAgentSession = k8sDir + "/agent-session"
	k8sNamespace    = "ironcurtain"
	// The Secrets of the deployment (docs/kubernetes.md "Secrets").
	secretGateway    = "ironcurtain-gateway"     // operator token, API keys, GitHub token
	secretDatabase   = "ironcurtain-database"    // the database URL
	secretAgentToken = "ironcurtain-agent-token" // one per agent run (a generated name)
)

// k8sOverlays are the overlays an operator applies; each must satisfy every
// invariant.
var k8sOverlays = []string{"overlays/cloudnativepg", "overlays/managed-postgres"}

// k8sObject is one rendered object; Raw keeps its JSON for typed decoding.
type k8sObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Raw json.RawMessage `json:"-"`
}

func (o k8sObject) decode(t *testing.T, into any) {
	t.Helper()
	if err := json.Unmarshal(o.Raw, into); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Metadata.Name, err)
	}
}

type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	} `json:"matchExpressions"`
}

// matches implements the Kubernetes label selector semantics (an empty
// selector matches everything).
func (s *labelSelector) matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		v, ok := labels[e.Key]
		switch e.Operator {
		case "In":
			if !ok || !contains(e.Values, v) {
				return false
			}
		case "NotIn":
			if ok && contains(e.Values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

type k8sContainer struct {
	Name    string   `json:"name"`
	Image   string   `json:"image"`
	Command []string `json:"command"`
	Args    []string `json:"args"`
	Ports   []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	} `json:"ports"`
	Env []struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"secretKeyRef"`
		} `json:"valueFrom"`
	} `json:"env"`
	EnvFrom []struct {
		SecretRef *struct {
			Name string `json:"name"`
		} `json:"secretRef"`
	} `json:"envFrom"`
	VolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
		ReadOnly  bool   `json:"readOnly"`
	} `json:"volumeMounts"`
	StartupProbe    *k8sProbe           `json:"startupProbe"`
	LivenessProbe   *k8sProbe           `json:"livenessProbe"`
	ReadinessProbe  *k8sProbe           `json:"readinessProbe"`
	Resources       map[string]any      `json:"resources"`
	SecurityContext *k8sSecurityContext `json:"securityContext"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `json:"path"`
		Port any    `json:"port"`
	} `json:"httpGet"`
}

type k8sSecurityContext struct {
	RunAsNonRoot             *bool `json:"runAsNonRoot"`
	RunAsUser                *int  `json:"runAsUser"`
	RunAsGroup               *int  `json:"runAsGroup"`
	FSGroup                  *int  `json:"fsGroup"`
	AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
	Privileged               *bool `json:"privileged"`
	ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
	Capabilities             *struct {
		Add  []string `json:"add"`
		Drop []string `json:"drop"`
	} `json:"capabilities"`
	SeccompProfile *struct {
		Type string `json:"type"`
	} `json:"seccompProfile"`
}

type k8sPodSpec struct {
	ServiceAccountName           string              `json:"serviceAccountName"`
	AutomountServiceAccountToken *bool               `json:"automountServiceAccountToken"`
	EnableServiceLinks           *bool               `json:"enableServiceLinks"`
	HostNetwork                  bool                `json:"hostNetwork"`
	HostPID                      bool                `json:"hostPID"`
	HostIPC                      bool                `json:"hostIPC"`
	SecurityContext              *k8sSecurityContext `json:"securityContext"`
	Containers                   []k8sContainer      `json:"containers"`
	InitContainers               []k8sContainer      `json:"initContainers"`
	Volumes                      []struct {
		Name   string `json:"name"`
		Secret *struct {
			SecretName string `json:"secretName"`
		} `json:"secret"`
		Projected *struct {
			Sources []struct {
				Secret *struct {
					Name string `json:"name"`
				} `json:"secret"`
			} `json:"sources"`
		} `json:"projected"`
		EmptyDir              map[string]any         `json:"emptyDir"`
		ConfigMap             *struct{ Name string } `json:"configMap"`
		PersistentVolumeClaim *struct {
			ClaimName string `json:"claimName"`
		} `json:"persistentVolumeClaim"`
		HostPath map[string]any `json:"hostPath"`
	} `json:"volumes"`
}

// k8sWorkload is an object that runs pods, with its pod template.
type k8sWorkload struct {
	Kind, Name, Namespace string
	Replicas              *int
	Labels                map[string]string // the pods'
	Spec                  k8sPodSpec
}

func (w k8sWorkload) String() string { return w.Kind + "/" + w.Name }

func (w k8sWorkload) role() string { return w.Labels["ironcurtain.dev/role"] }

func (w k8sWorkload) allContainers() []k8sContainer {
	return append(append([]k8sContainer(nil), w.Spec.InitContainers...), w.Spec.Containers...)
}

// secretRefs returns every Secret the workload's pods read (environment,
// envFrom, secret and projected volumes).
func (w k8sWorkload) secretRefs() []string {
	set := map[string]bool{}
	for _, c := range w.allContainers() {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				set[e.ValueFrom.SecretKeyRef.Name] = true
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				set[e.SecretRef.Name] = true
			}
		}
	}
	for _, v := range w.Spec.Volumes {
		if v.Secret != nil {
			set[v.Secret.SecretName] = true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					set[s.Secret.Name] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// k8sRender is one rendered kustomization.
type k8sRender struct {
	Dir     string
	Objects []k8sObject
}

// renderKustomization runs kustomize on dir (an absolute path) as
// `kubectl apply -k` does.
func renderKustomization(t *testing.T, dir string) k8sRender {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := k8sRender{Dir: dir}
	for _, res := range rm.Resources() {
		b, err := res.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var o k8sObject
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		o.Raw = b
		r.Objects = append(r.Objects, o)
	}
	if len(r.Objects) == 0 {
		t.Fatalf("%s rendered nothing", dir)
	}
	return r
}

// renderOverlay renders compose/kubernetes/<overlay>.
func renderOverlay(t *testing.T, overlay string) k8sRender {
	t.Helper()
	abs, err := filepath.Abs(repoPath(k8sDir + "/" + overlay))
	if err != nil {
		t.Fatal(err)
	}
	return renderKustomization(t, abs)
}

// Launch-time values of the agent run the tests render.
const (
	testRunSuffix  = "-run-42"
	testAgentToken = "icsess_test_token_not_a_secret_0123456789"
)

// renderAgentRun renders one agent run the way docs/kubernetes.md tells a
// launcher to: a kustomization of its own around compose/kubernetes/agent-session
// that names the run and generates the token's Secret from token.env.
func renderAgentRun(t *testing.T) k8sRender {
	t.Helper()
	session, err := filepath.Abs(repoPath(k8sAgentSession))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes a base by a relative path only.
	rel, err := filepath.Rel(dir, session)
	if err != nil {
		t.Fatal(err)
	}
	kust := types.Kustomization{
		Resources:  []string{filepath.ToSlash(rel)},
		NameSuffix: testRunSuffix,
		SecretGenerator: []types.SecretArgs{{GeneratorArgs: types.GeneratorArgs{
			Name:          secretAgentToken,
			Namespace:     k8sNamespace,
			KvPairSources: types.KvPairSources{EnvSources: []string{"token.env"}},
		}}},
	}
	kust.Kind, kust.APIVersion = types.KustomizationKind, types.KustomizationVersion
	b, err := yaml.Marshal(kust)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token.env"), []byte("token="+testAgentToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return renderKustomization(t, dir)
}

func (r k8sRender) workloads(t *testing.T) []k8sWorkload {
	t.Helper()
	var out []k8sWorkload
	for _, o := range r.Objects {
		var spec struct {
			Spec struct {
				Replicas *int `json:"replicas"`
				Template *struct {
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
					Spec k8sPodSpec `json:"spec"`
				} `json:"template"`
				JobTemplate *struct {
					Spec struct {
						Template struct {
							Metadata struct {
								Labels map[string]string `json:"labels"`
							} `json:"metadata"`
							Spec k8sPodSpec `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				} `json:"jobTemplate"`
			} `json:"spec"`
		}
		w := k8sWorkload{Kind: o.Kind, Name: o.Metadata.Name, Namespace: o.Metadata.Namespace}
		switch o.Kind {
		case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
			o.decode(t, &spec)
			if spec.Spec.Template == nil {
				t.Fatalf("%s %s has no pod template", o.Kind, o.Metadata.Name)
			}
			w.Replicas, w.Labels, w.Spec = spec.Spec.Replicas, spec.Spec.Template.Metadata.Labels, spec.Spec.Template.Spec
		case "CronJob":
			o.decode(t, &spec)
			w.Labels, w.Spec = spec.Spec.JobTemplate.Spec.Template.Metadata.Labels, spec.Spec.JobTemplate.Spec.Template.Spec
		case "Pod":
			var p struct {
				Spec k8sPodSpec `json:"spec"`
			}
			o.decode(t, &p)
			w.Labels, w.Spec = o.Metadata.Labels, p.Spec
		default:
			continue
		}
		out = append(out, w)
	}
	return out
}

func (r k8sRender) find(t *testing.T, kind, name string) k8sObject {
	t.Helper()
	for _, o := range r.Objects {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	t.Fatalf("%s: no %s %s", r.Dir, kind, name)
	return k8sObject{}
}

func (r k8sRender) ofKind(kind string) []k8sObject {
	var out []k8sObject
	for _, o := range r.Objects {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func byRole(t *testing.T, ws []k8sWorkload, role string) []k8sWorkload {
	t.Helper()
	var out []k8sWorkload
	for _, w := range ws {
		if w.role() == role {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no workload with ironcurtain.dev/role=%s", role)
	}
	return out
}

// gatewayConfigYAML returns the gateway.yaml of the rendered ConfigMap the
// gateway mounts.
func gatewayConfigYAML(t *testing.T, r k8sRender, gw k8sWorkload) []byte {
	t.Helper()
	for _, v := range gw.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		r.find(t, "ConfigMap", v.ConfigMap.Name).decode(t, &cm)
		if s, ok := cm.Data["gateway.yaml"]; ok {
			return []byte(s)
		}
	}
	t.Fatalf("the gateway mounts no ConfigMap with a gateway.yaml")
	return nil
}

// k8sCase is a rendered overlay together with one rendered agent run: what
// runs in the cluster once an agent has been started.
type k8sCase struct {
	name      string
	render    k8sRender
	workloads []k8sWorkload
}

func k8sCases(t *testing.T) []k8sCase {
	t.Helper()
	agent := renderAgentRun(t)
	var out []k8sCase
	add := func(name string, r k8sRender) {
		all := k8sRender{Dir: r.Dir, Objects: append(append([]k8sObject(nil), r.Objects...), agent.Objects...)}
		out = append(out, k8sCase{name: name, render: all, workloads: all.workloads(t)})
	}
	for _, ov := range k8sOverlays {
		add(ov, renderOverlay(t, ov))
	}
	add("overlays/cloudnativepg+components/durable-spool", renderDurableSpool(t))
	return out
}

// renderDurableSpool renders an operator's overlay of overlays/cloudnativepg
// with components/durable-spool (the gateway as a StatefulSet).
func renderDurableSpool(t *testing.T) k8sRender {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(repoPath(k8sDir + "/" + p))
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, abs)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	kust := types.Kustomization{
		Resources:  []string{rel("overlays/cloudnativepg")},
		Components: []string{rel("components/durable-spool")},
	}
	kust.Kind, kust.APIVersion = types.KustomizationKind, types.KustomizationVersion
	b, err := yaml.Marshal(kust)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return renderKustomization(t, dir)
}

// TestKubernetesDurableSpool: the component turns the gateway into a
// StatefulSet whose pod template is the Deployment's but for the state
// volume, which becomes a claim per replica (the two files cannot drift).
func TestKubernetesDurableSpool(t *testing.T) {
	podTemplate := func(r k8sRender, kind string) (map[string]any, []any) {
		var o struct {
			Spec struct {
				Template             map[string]any `json:"template"`
				VolumeClaimTemplates []any          `json:"volumeClaimTemplates"`
			} `json:"spec"`
		}
		r.find(t, kind, "ironcurtain-gateway").decode(t, &o)
		spec := o.Spec.Template["spec"].(map[string]any)
		var vols []any
		for _, v := range spec["volumes"].([]any) {
			if v.(map[string]any)["name"] != "state" {
				vols = append(vols, v)
			}
		}
		spec["volumes"] = vols
		return o.Spec.Template, o.Spec.VolumeClaimTemplates
	}
	dep, _ := podTemplate(renderOverlay(t, "overlays/cloudnativepg"), "Deployment")
	durable := renderDurableSpool(t)
	sts, claims := podTemplate(durable, "StatefulSet")
	if len(durable.ofKind("Deployment")) != 0 {
		t.Errorf("the component leaves a Deployment of the gateway next to its StatefulSet")
	}
	a, _ := json.Marshal(dep)
	b, _ := json.Marshal(sts)
	if string(a) != string(b) {
		t.Errorf("the StatefulSet's pod template differs from the Deployment's (beyond the state volume):\n%s\n%s", a, b)
	}
	var names []string
	for _, c := range claims {
		names = append(names, fmt.Sprint(c.(map[string]any)["metadata"].(map[string]any)["name"]))
	}
	if strings.Join(names, ",") != "state" {
		t.Errorf("volumeClaimTemplates %v, want [state] (mounted at /var/lib/ironcurtain)", names)
	}
}

func TestKubernetesGatewayDeployment(t *testing.T) {
	for _, c := range k8sCases(t) {
		t.Run(c.name, func(t *testing.T) {
			gws := byRole(t, c.workloads, "gateway")
			if len(gws) != 1 || (gws[0].Kind != "Deployment" && gws[0].Kind != "StatefulSet") {
				t.Fatalf("gateway workloads %v, want one Deployment (or StatefulSet: components/durable-spool)", gws)
			}
			gw := gws[0]
			if gw.Replicas == nil || *gw.Replicas != 2 {
				t.Errorf("the gateway has replicas %s, want 2", intText(gw.Replicas))
			}
			if gw.Kind == "Deployment" {
				var dep struct {
					Spec struct {
						Strategy struct {
							RollingUpdate struct {
								MaxUnavailable any `json:"maxUnavailable"`
							} `json:"rollingUpdate"`
						} `json:"strategy"`
					} `json:"spec"`
				}
				c.render.find(t, "Deployment", gw.Name).decode(t, &dep)
				if fmt.Sprint(dep.Spec.Strategy.RollingUpdate.MaxUnavailable) != "0" {
					t.Errorf("rollingUpdate.maxUnavailable = %v, want 0 (a rollout never leaves fewer than 2 replicas)", dep.Spec.Strategy.RollingUpdate.MaxUnavailable)
				}
			}

			// The PodDisruptionBudget covers the gateway's pods and keeps one of them.
			pdbs := c.render.ofKind("PodDisruptionBudget")
			covered := false
			for _, o := range pdbs {
				var pdb struct {
					Spec struct {
						MinAvailable   any           `json:"minAvailable"`
						MaxUnavailable any           `json:"maxUnavailable"`
						Selector       labelSelector `json:"selector"`
					} `json:"spec"`
				}
				o.decode(t, &pdb)
				if o.Metadata.Namespace != gw.Namespace || !pdb.Spec.Selector.matches(gw.Labels) {
					continue
				}
				covered = true
				if fmt.Sprint(pdb.Spec.MinAvailable) != "1" && fmt.Sprint(pdb.Spec.MaxUnavailable) != "1" {
					t.Errorf("PodDisruptionBudget %s: minAvailable %v, maxUnavailable %v: want one replica kept", o.Metadata.Name, pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
				}
			}
			if !covered {
				t.Errorf("no PodDisruptionBudget selects the gateway's pods")
			}

			// Probes on the ops port: /healthz (startup, liveness), /readyz (readiness).
			cfg := gatewayConfigYAML(t, c.render, gw)
			_, _, ops := listenersOf(t, "gateway.yaml", cfg)
			ctr := gw.Spec.Containers[0]
			probes := []struct {
				name, path string
				p          *k8sProbe
			}{
				{"startupProbe", "/healthz", ctr.StartupProbe},
				{"livenessProbe", "/healthz", ctr.LivenessProbe},
				{"readinessProbe", "/readyz", ctr.ReadinessProbe},
			}
			for _, p := range probes {
				if p.p == nil || p.p.HTTPGet == nil {
					t.Errorf("the gateway has no HTTP %s", p.name)
					continue
				}
				if p.p.HTTPGet.Path != p.path {
					t.Errorf("%s path %q, want %q", p.name, p.p.HTTPGet.Path, p.path)
				}
				if port := containerPort(t, ctr, p.p.HTTPGet.Port); port != ops.Port {
					t.Errorf("%s probes port %d, want the ops port %d", p.name, port, ops.Port)
				}
			}
			for _, k := range []string{"requests", "limits"} {
				m, _ := ctr.Resources[k].(map[string]any)
				if m["cpu"] == nil || m["memory"] == nil {
					t.Errorf("the gateway's resources.%s lack cpu or memory: %v", k, ctr.Resources[k])
				}
			}
		})
	}
}

// listenersOf parses a gateway.yaml's listen addresses (defaults as the
// gateway's for absent keys).
func listenersOf(t *testing.T, what string, b []byte) (agent, egress, ops hostPort) {
	t.Helper()
	var l listeners
	if err := yaml.Unmarshal(b, &l); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return mustHostPort(t, what+" agent.listen", or(l.Agent.Listen, defaultAgentListen)),
		mustHostPort(t, what+" egress.listen", or(l.Egress.Listen, defaultEgressListen)),
		mustHostPort(t, what+" ops.listen", or(l.Ops.Listen, defaultOpsListen))
}

// containerPort resolves a probe's or Service's port (a number or a port name).
func containerPort(t *testing.T, c k8sContainer, port any) int {
	t.Helper()
	switch p := port.(type) {
	case float64:
		return int(p)
	case string:
		for _, cp := range c.Ports {
			if cp.Name == p {
				return cp.ContainerPort
			}
		}
		t.Errorf("container %s has no port named %q", c.Name, p)
	}
	return -1
}

// TestKubernetesPodSecurity checks every pod of every overlay and of an agent
// run against the restricted Pod Security Standard and more: a read-only root
// file system, no service account token, no host namespace or path.
func TestKubernetesPodSecurity(t *testing.T) {
	for _, c := range k8sCases(t) {
		t.Run(c.name, func(t *testing.T) {
			for _, role := range []string{"gateway", "migrate", "agent"} {
				byRole(t, c.workloads, role) // each is there
			}
			for _, w := range c.workloads {
				if w.Spec.HostNetwork || w.Spec.HostPID || w.Spec.HostIPC {
					t.Errorf("%s shares a host namespace", w)
				}
				if w.Spec.AutomountServiceAccountToken == nil || *w.Spec.AutomountServiceAccountToken {
					t.Errorf("%s: automountServiceAccountToken is not false", w)
				}
				if w.Spec.ServiceAccountName == "" || w.Spec.ServiceAccountName == "default" {
					t.Errorf("%s runs as the default service account", w)
				}
				pod := w.Spec.SecurityContext
				if pod == nil {
					pod = &k8sSecurityContext{}
				}
				for _, v := range w.Spec.Volumes {
					if v.HostPath != nil {
						t.Errorf("%s mounts the host path volume %s", w, v.Name)
					}
				}
				for _, ctr := range w.allContainers() {
					sc := ctr.SecurityContext
					if sc == nil {
						t.Errorf("%s container %s has no securityContext", w, ctr.Name)
						continue
					}
					what := fmt.Sprintf("%s container %s", w, ctr.Name)
					if !isTrue(sc.RunAsNonRoot) && !isTrue(pod.RunAsNonRoot) {
						t.Errorf("%s: runAsNonRoot is not set", what)
					}
					if u := firstInt(sc.RunAsUser, pod.RunAsUser); u != nil && *u == 0 {
						t.Errorf("%s runs as uid 0", what)
					}
					if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
						t.Errorf("%s: allowPrivilegeEscalation is not false", what)
					}
					if isTrue(sc.Privileged) {
						t.Errorf("%s is privileged", what)
					}
					if !isTrue(sc.ReadOnlyRootFilesystem) {
						t.Errorf("%s: readOnlyRootFilesystem is not true", what)
					}
					if sc.Capabilities == nil || !contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
						t.Errorf("%s: capabilities %+v, want drop [ALL] and no add", what, sc.Capabilities)
					}
					seccomp := sc.SeccompProfile
					if seccomp == nil {
						seccomp = pod.SeccompProfile
					}
					if seccomp == nil || seccomp.Type != "RuntimeDefault" {
						t.Errorf("%s: seccompProfile is not RuntimeDefault", what)
					}
				}
			}
		})
	}
}

func intText(p *int) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func isTrue(b *bool) bool { return b != nil && *b }

func firstInt(vs ...*int) *int {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// TestKubernetesSecretMounts checks who reads which Secret: the gateway's
// Secret only the gateway, the database URL only the gateway and the migrate
// Job, an agent run's token only that run's pods, and an agent nothing else.
func TestKubernetesSecretMounts(t *testing.T) {
	for _, c := range k8sCases(t) {
		t.Run(c.name, func(t *testing.T) {
			readers := map[string][]string{} // secret → roles reading it
			for _, w := range c.workloads {
				for _, s := range w.secretRefs() {
					readers[s] = append(readers[s], w.role())
				}
			}
			agentSecrets := 0
			for s, roles := range readers {
				switch {
				case s == secretGateway:
					if strings.Join(roles, ",") != "gateway" {
						t.Errorf("Secret %s is read by %v, want the gateway only", s, roles)
					}
				case s == secretDatabase:
					for _, r := range roles {
						if r != "gateway" && r != "migrate" {
							t.Errorf("Secret %s is read by %s, want the gateway and the migrate Job only", s, r)
						}
					}
				case strings.HasPrefix(s, secretAgentToken+testRunSuffix+"-"):
					agentSecrets++
					if strings.Join(roles, ",") != "agent" {
						t.Errorf("Secret %s (the run's agent token) is read by %v, want that run's agent only", s, roles)
					}
				default:
					t.Errorf("Secret %s (read by %v) is not one of the deployment's: docs/kubernetes.md lists them", s, roles)
				}
			}
			for _, s := range []string{secretGateway, secretDatabase} {
				if len(readers[s]) == 0 {
					t.Errorf("nothing reads Secret %s: the check would prove nothing", s)
				}
			}
			if agentSecrets != 1 {
				t.Errorf("%d agent token Secrets are read, want the run's one", agentSecrets)
			}
			// The generated Secret carries the token under the key the Job reads.
			for _, o := range c.render.ofKind("Secret") {
				if strings.HasPrefix(o.Metadata.Name, secretAgentToken) && o.Metadata.Namespace != k8sNamespace {
					t.Errorf("Secret %s is in namespace %q, want %s (the agent's)", o.Metadata.Name, o.Metadata.Namespace, k8sNamespace)
				}
			}

			for _, a := range byRole(t, c.workloads, "agent") {
				if got := a.secretRefs(); len(got) != 1 {
					t.Errorf("%s reads Secrets %v, want its agent token only", a, got)
				}
				for _, v := range a.Spec.Volumes {
					if v.EmptyDir == nil {
						t.Errorf("%s mounts volume %s, which is not an emptyDir: an agent acts only through the gateway", a, v.Name)
					}
				}
				for _, ctr := range a.allContainers() {
					for _, e := range ctr.Env {
						if credentialNames.MatchString(e.Name) {
							t.Errorf("%s has %s", a, e.Name)
						}
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.Name != "IRONCURTAIN_AGENT_TOKEN" {
							t.Errorf("%s: %s comes from a Secret", a, e.Name)
						}
					}
				}
			}
		})
	}
}

// TestKubernetesAgentFindsTheGateway checks that an agent's URLs are built from
// the environment variables of the gateway's Services (no DNS), and that the
// Services, the container ports and gateway.yaml agree on every port.
func TestKubernetesAgentFindsTheGateway(t *testing.T) {
	for _, c := range k8sCases(t) {
		t.Run(c.name, func(t *testing.T) {
			gw := byRole(t, c.workloads, "gateway")[0]
			agentAPI, egress, ops := listenersOf(t, "gateway.yaml", gatewayConfigYAML(t, c.render, gw))
			if !isWildcard(agentAPI.Host) || !isWildcard(egress.Host) || !isWildcard(ops.Host) {
				t.Errorf("gateway.yaml listeners %v %v %v: a pod is reached on its own address; the NetworkPolicies decide who may", agentAPI, egress, ops)
			}
			ctr := gw.Spec.Containers[0]
			// service env prefix → the gateway port it must lead to
			services := map[string]int{}
			for _, o := range c.render.ofKind("Service") {
				var svc struct {
					Spec struct {
						ClusterIP   string            `json:"clusterIP"`
						Type        string            `json:"type"`
						Selector    map[string]string `json:"selector"`
						ExternalIPs []string          `json:"externalIPs"`
						Ports       []struct {
							Port       int `json:"port"`
							TargetPort any `json:"targetPort"`
						} `json:"ports"`
					} `json:"spec"`
				}
				o.decode(t, &svc)
				if svc.Spec.Type != "" && svc.Spec.Type != "ClusterIP" || len(svc.Spec.ExternalIPs) > 0 {
					t.Errorf("Service %s is %s with external IPs %v: nothing is exposed outside the cluster", o.Metadata.Name, svc.Spec.Type, svc.Spec.ExternalIPs)
				}
				sel := labelSelector{MatchLabels: svc.Spec.Selector}
				if o.Metadata.Namespace != gw.Namespace || len(svc.Spec.Selector) == 0 || !sel.matches(gw.Labels) {
					continue
				}
				if svc.Spec.ClusterIP == "None" && len(svc.Spec.Ports) == 0 {
					continue // a StatefulSet's headless governing Service: no door
				}
				if len(svc.Spec.Ports) != 1 {
					t.Errorf("Service %s has %d ports, want one door per Service", o.Metadata.Name, len(svc.Spec.Ports))
					continue
				}
				p := svc.Spec.Ports[0]
				target := containerPort(t, ctr, p.TargetPort)
				if target != p.Port {
					t.Errorf("Service %s maps %d to %d: keep the gateway's port numbers", o.Metadata.Name, p.Port, target)
				}
				services[serviceEnvPrefix(o.Metadata.Name)] = target
			}
			want := map[string]int{"agent API": agentAPI.Port, "egress proxy": egress.Port, "ops API": ops.Port}
			for door, port := range want {
				found := false
				for _, p := range services {
					found = found || p == port
				}
				if !found {
					t.Errorf("no Service leads to the %s (port %d)", door, port)
				}
			}

			for _, a := range byRole(t, c.workloads, "agent") {
				if a.Namespace != gw.Namespace {
					t.Errorf("%s is in namespace %s: Service variables exist only in the gateway's (%s)", a, a.Namespace, gw.Namespace)
				}
				if a.Spec.EnableServiceLinks != nil && !*a.Spec.EnableServiceLinks {
					t.Errorf("%s disables enableServiceLinks: its URLs would not expand", a)
				}
				env := map[string]string{}
				for _, e := range a.Spec.Containers[0].Env {
					// $(NAME) expands only variables defined above it (and Service ones).
					for _, ref := range k8sVarRef.FindAllStringSubmatch(e.Value, -1) {
						if _, defined := env[ref[1]]; !defined && !strings.HasSuffix(ref[1], "_SERVICE_HOST") && !strings.HasSuffix(ref[1], "_SERVICE_PORT") {
							t.Errorf("%s: %s refers to $(%s), which is not defined above it", a, e.Name, ref[1])
						}
					}
					env[e.Name] = e.Value
				}
				for _, tt := range []struct {
					key, path string
					port      int
				}{
					{"IRONCURTAIN_MCP_URL", "/mcp", agentAPI.Port},
					{"IRONCURTAIN_MODEL_BASE_URL", "/llm", agentAPI.Port},
					{"HTTPS_PROXY", "", egress.Port},
					{"HTTP_PROXY", "", egress.Port},
				} {
					v, ok := env[tt.key]
					if !ok {
						t.Errorf("%s has no %s", a, tt.key)
						continue
					}
					m := serviceURL.FindStringSubmatch(v)
					if m == nil || m[2] != m[3] || m[4] != tt.path {
						t.Errorf("%s %s = %q: want http://$(<SVC>_SERVICE_HOST):$(<SVC>_SERVICE_PORT)%s", a, tt.key, v, tt.path)
						continue
					}
					if services[m[2]] != tt.port {
						t.Errorf("%s %s names Service variables %s_*, which lead to port %d, want %d", a, tt.key, m[2], services[m[2]], tt.port)
					}
					if strings.Contains(tt.key, "PROXY") && m[1] != "agent:$(IRONCURTAIN_AGENT_TOKEN)@" {
						t.Errorf("%s %s = %q: want the agent token as proxy credentials", a, tt.key, v)
					}
				}
			}
		})
	}
}

// serviceURL matches http://[userinfo@]$(X_SERVICE_HOST):$(X_SERVICE_PORT)[path]:
// 1 userinfo, 2 and 3 the Service variable prefixes, 4 the path.
var serviceURL = regexp.MustCompile(`^http://((?:[^@/]*@)?)\$\(([A-Z0-9_]+)_SERVICE_HOST\):\$\(([A-Z0-9_]+)_SERVICE_PORT\)(/[^?#]*)?$`)

// k8sVarRef matches a Kubernetes $(NAME) variable reference.
var k8sVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// serviceEnvPrefix is the prefix of the variables Kubernetes sets for a
// Service: the name upper-cased, dashes as underscores.
func serviceEnvPrefix(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
