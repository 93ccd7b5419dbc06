package deploy

import (
	"fmt"
	"net/netip"
	"testing"
)

// This file evaluates the rendered NetworkPolicies the way a conforming CNI
// enforces them (networking.k8s.io/v1 semantics: a pod selected by a policy of
// a direction is isolated in that direction, and a connection passes when
// some policy selecting the pod allows it, on the source's egress side and on
// the destination's ingress side), over the pods of the deployment and a few
// others of the cluster, and checks who may reach what.

type k8sPolicy struct {
	Namespace string
	Name      string
	Spec      struct {
		PodSelector labelSelector `json:"podSelector"`
		PolicyTypes []string      `json:"policyTypes"`
		Ingress     []k8sRule     `json:"ingress"`
		Egress      []k8sRule     `json:"egress"`
	}
}

type k8sRule struct {
	From  []k8sPeer `json:"from"`
	To    []k8sPeer `json:"to"`
	Ports []struct {
		Protocol string `json:"protocol"`
		Port     any    `json:"port"`
		EndPort  *int   `json:"endPort"`
	} `json:"ports"`
}

type k8sPeer struct {
	PodSelector       *labelSelector `json:"podSelector"`
	NamespaceSelector *labelSelector `json:"namespaceSelector"`
	IPBlock           *struct {
		CIDR   string   `json:"cidr"`
		Except []string `json:"except"`
	} `json:"ipBlock"`
}

// netEndpoint is a pod (Namespace set) or an address outside the cluster.
type netEndpoint struct {
	Name      string
	Namespace string // "" outside the cluster
	Labels    map[string]string
	IP        netip.Addr
	Ports     map[string]int // named container ports
}

type netCluster struct {
	t          *testing.T
	policies   []k8sPolicy
	namespaces map[string]map[string]string // name → labels
}

func newNetCluster(t *testing.T, r k8sRender) *netCluster {
	t.Helper()
	c := &netCluster{t: t, namespaces: map[string]map[string]string{}}
	for _, o := range r.ofKind("Namespace") {
		labels := map[string]string{"kubernetes.io/metadata.name": o.Metadata.Name}
		for k, v := range o.Metadata.Labels {
			labels[k] = v
		}
		c.namespaces[o.Metadata.Name] = labels
	}
	for _, o := range r.ofKind("NetworkPolicy") {
		p := k8sPolicy{Namespace: o.Metadata.Namespace, Name: o.Metadata.Name}
		var raw struct {
			Spec *struct {
				PodSelector labelSelector `json:"podSelector"`
				PolicyTypes []string      `json:"policyTypes"`
				Ingress     []k8sRule     `json:"ingress"`
				Egress      []k8sRule     `json:"egress"`
			} `json:"spec"`
		}
		o.decode(t, &raw)
		if raw.Spec == nil || p.Namespace == "" {
			t.Fatalf("NetworkPolicy %s: no spec or namespace", p.Name)
		}
		p.Spec.PodSelector, p.Spec.Ingress, p.Spec.Egress = raw.Spec.PodSelector, raw.Spec.Ingress, raw.Spec.Egress
		p.Spec.PolicyTypes = raw.Spec.PolicyTypes
		if len(p.Spec.PolicyTypes) == 0 {
			// The API's default: Ingress, plus Egress when egress rules exist.
			p.Spec.PolicyTypes = []string{"Ingress"}
			if len(p.Spec.Egress) > 0 {
				p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, "Egress")
			}
		}
		c.policies = append(c.policies, p)
	}
	return c
}

// addNamespace registers a namespace of the cluster the manifests do not
// create (kube-system, an operators' namespace, ...).
func (c *netCluster) addNamespace(name string, labels map[string]string) {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range labels {
		l[k] = v
	}
	if old, ok := c.namespaces[name]; ok {
		for k, v := range old {
			l[k] = v
		}
	}
	c.namespaces[name] = l
}

func (c *netCluster) selecting(pod netEndpoint, direction string) (out []k8sPolicy) {
	if pod.Namespace == "" {
		return nil
	}
	for _, p := range c.policies {
		if p.Namespace == pod.Namespace && contains(p.Spec.PolicyTypes, direction) && p.Spec.PodSelector.matches(pod.Labels) {
			out = append(out, p)
		}
	}
	return out
}

func (c *netCluster) peerMatches(policyNS string, peer k8sPeer, ep netEndpoint) bool {
	if peer.IPBlock != nil {
		return ipBlockHolds(c.t, peer.IPBlock.CIDR, peer.IPBlock.Except, ep.IP)
	}
	if ep.Namespace == "" {
		return false // pod and namespace selectors name pods only
	}
	if peer.NamespaceSelector != nil {
		if !peer.NamespaceSelector.matches(c.namespaces[ep.Namespace]) {
			return false
		}
	} else if ep.Namespace != policyNS {
		return false
	}
	return peer.PodSelector == nil || peer.PodSelector.matches(ep.Labels)
}

func ipBlockHolds(t *testing.T, cidr string, except []string, ip netip.Addr) bool {
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		t.Fatalf("ipBlock cidr %q: %v", cidr, err)
	}
	if !ip.IsValid() || !pfx.Contains(ip) {
		return false
	}
	for _, e := range except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			t.Fatalf("ipBlock except %q: %v", e, err)
		}
		if ex.Contains(ip) {
			return false
		}
	}
	return true
}

func ruleAllowsPort(t *testing.T, r k8sRule, dst netEndpoint, proto string, port int) bool {
	if len(r.Ports) == 0 {
		return true
	}
	for _, p := range r.Ports {
		pp := p.Protocol
		if pp == "" {
			pp = "TCP"
		}
		if pp != proto {
			continue
		}
		switch v := p.Port.(type) {
		case nil:
			return true
		case float64:
			lo, hi := int(v), int(v)
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			if port >= lo && port <= hi {
				return true
			}
		case string:
			if n, ok := dst.Ports[v]; ok && n == port {
				return true
			}
		default:
			t.Fatalf("port %v: unexpected type %T", p.Port, p.Port)
		}
	}
	return false
}

// allowed reports whether src may open a connection to dst:port/proto.
func (c *netCluster) allowed(src, dst netEndpoint, proto string, port int) bool {
	egressOK := true
	if pols := c.selecting(src, "Egress"); len(pols) > 0 {
		egressOK = false
		for _, p := range pols {
			for _, r := range p.Spec.Egress {
				if !ruleAllowsPort(c.t, r, dst, proto, port) {
					continue
				}
				if len(r.To) == 0 {
					egressOK = true
				}
				for _, peer := range r.To {
					egressOK = egressOK || c.peerMatches(p.Namespace, peer, dst)
				}
			}
		}
	}
	ingressOK := true
	if pols := c.selecting(dst, "Ingress"); len(pols) > 0 {
		ingressOK = false
		for _, p := range pols {
			for _, r := range p.Spec.Ingress {
				if !ruleAllowsPort(c.t, r, dst, proto, port) {
					continue
				}
				if len(r.From) == 0 {
					ingressOK = true
				}
				for _, peer := range r.From {
					ingressOK = ingressOK || c.peerMatches(p.Namespace, peer, src)
				}
			}
		}
	}
	return egressOK && ingressOK
}

// workloadEndpoint makes a pod of a rendered workload.
func workloadEndpoint(w k8sWorkload, ip string) netEndpoint {
	ep := netEndpoint{Name: w.role(), Namespace: w.Namespace, Labels: w.Labels, IP: netip.MustParseAddr(ip), Ports: map[string]int{}}
	for _, c := range w.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name != "" {
				ep.Ports[p.Name] = p.ContainerPort
			}
		}
	}
	return ep
}

// databaseEndpoint is a pod of the CloudNativePG cluster the overlay defines,
// labelled as the operator labels it (cnpg.io/cluster, inheritedMetadata).
func databaseEndpoint(t *testing.T, r k8sRender) (netEndpoint, bool) {
	t.Helper()
	for _, o := range r.ofKind("Cluster") {
		var cl struct {
			Spec struct {
				InheritedMetadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"inheritedMetadata"`
			} `json:"spec"`
		}
		o.decode(t, &cl)
		labels := map[string]string{"cnpg.io/cluster": o.Metadata.Name, "cnpg.io/instanceRole": "primary"}
		for k, v := range cl.Spec.InheritedMetadata.Labels {
			labels[k] = v
		}
		return netEndpoint{Name: "postgres", Namespace: o.Metadata.Namespace, Labels: labels, IP: netip.MustParseAddr("10.1.2.10")}, true
	}
	return netEndpoint{}, false
}

func TestKubernetesNetworkPolicies(t *testing.T) {
	for _, c := range k8sCases(t) {
		t.Run(c.name, func(t *testing.T) {
			net := newNetCluster(t, c.render)
			net.addNamespace("kube-system", nil)
			net.addNamespace("ironcurtain-operators", map[string]string{"ironcurtain.dev/operator": "true"})
			net.addNamespace("default", nil)
			net.addNamespace("cnpg-system", nil)
			if _, ok := net.namespaces[k8sNamespace]; !ok {
				t.Fatalf("the overlay does not create namespace %s", k8sNamespace)
			}

			gateway := workloadEndpoint(byRole(t, c.workloads, "gateway")[0], "10.1.0.10")
			migrate := workloadEndpoint(byRole(t, c.workloads, "migrate")[0], "10.1.0.11")
			agent := workloadEndpoint(byRole(t, c.workloads, "agent")[0], "10.1.0.12")
			otherAgent := agent
			otherAgent.IP = netip.MustParseAddr("10.1.0.13")
			// A pod someone starts in the namespace without a role (a debug pod).
			stray := netEndpoint{Name: "stray pod", Namespace: k8sNamespace, Labels: map[string]string{"app": "debug"}, IP: netip.MustParseAddr("10.1.0.14")}
			dns := netEndpoint{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}, IP: netip.MustParseAddr("10.1.9.2")}
			operator := netEndpoint{Name: "operator pod", Namespace: "ironcurtain-operators", Labels: map[string]string{"app": "prometheus"}, IP: netip.MustParseAddr("10.1.5.5")}
			stranger := netEndpoint{Name: "pod in default", Namespace: "default", Labels: map[string]string{"app": "web"}, IP: netip.MustParseAddr("10.1.6.6")}
			cnpgOperator := netEndpoint{Name: "cnpg operator", Namespace: "cnpg-system", Labels: map[string]string{"app.kubernetes.io/name": "cloudnative-pg"}, IP: netip.MustParseAddr("10.1.7.7")}
			internet := netEndpoint{Name: "internet host", IP: netip.MustParseAddr("140.82.112.3")}
			internet6 := netEndpoint{Name: "internet host (IPv6)", IP: netip.MustParseAddr("2606:50c0:8000::153")}
			metadata := netEndpoint{Name: "metadata server", IP: netip.MustParseAddr("169.254.169.254")}
			apiServer := netEndpoint{Name: "API server", IP: netip.MustParseAddr("10.96.0.1")}
			lan := netEndpoint{Name: "private host", IP: netip.MustParseAddr("192.168.1.20")}
			database, inCluster := databaseEndpoint(t, c.render)
			if !inCluster {
				// overlays/managed-postgres: the address its patch names.
				database = netEndpoint{Name: "managed postgres", IP: netip.MustParseAddr("10.20.0.5")}
			}
			gwPorts := []int{8080, 3128, 8081}

			type conn struct {
				src, dst netEndpoint
				proto    string
				port     int
				want     bool
			}
			var conns []conn
			tcp := func(src, dst netEndpoint, port int, want bool) {
				conns = append(conns, conn{src, dst, "TCP", port, want})
			}
			// Agents: the agent API and the proxy of the gateway, nothing else.
			tcp(agent, gateway, 8080, true)
			tcp(agent, gateway, 3128, true)
			tcp(agent, gateway, 8081, false)
			tcp(agent, gateway, 9090, false)
			for _, dst := range []netEndpoint{internet, internet6, metadata, apiServer, lan, database, otherAgent, stray, operator, migrate} {
				for _, port := range []int{80, 443, 5432, 8080} {
					tcp(agent, dst, port, false)
				}
			}
			tcp(agent, dns, 53, false)
			conns = append(conns, conn{agent, dns, "UDP", 53, false})
			// Nothing reaches an agent.
			for _, src := range []netEndpoint{gateway, otherAgent, stray, operator, stranger} {
				tcp(src, agent, 8080, false)
			}
			// The gateway's doors: the ops port from the operator namespaces only; the
			// agent doors from agents only.
			tcp(operator, gateway, 8081, true)
			tcp(operator, gateway, 8080, false)
			tcp(operator, gateway, 3128, false)
			for _, src := range []netEndpoint{stranger, stray, migrate, dns, cnpgOperator} {
				for _, port := range gwPorts {
					tcp(src, gateway, port, false)
				}
			}
			if inCluster {
				for _, port := range gwPorts {
					tcp(database, gateway, port, false)
				}
			}
			// The gateway's way out: the internet on 443, DNS, Postgres; never the
			// cluster's private addresses or the metadata server.
			tcp(gateway, internet, 443, true)
			tcp(gateway, internet6, 443, true)
			tcp(gateway, internet, 22, false)
			tcp(gateway, metadata, 80, false)
			tcp(gateway, metadata, 443, false)
			tcp(gateway, apiServer, 443, false)
			tcp(gateway, lan, 443, false)
			for _, special := range []string{"0.0.0.1", "100.64.0.1", "127.0.0.1", "172.16.0.1", "192.0.0.8", "198.18.0.1", "224.0.0.251", "240.0.0.1", "255.255.255.255",
				"::1", "::a00:1", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1", "2001::1", "2002:a00:1::1", "fd00::1", "fe80::1", "ff02::1"} {
				tcp(gateway, netEndpoint{Name: special, IP: netip.MustParseAddr(special)}, 443, false)
			}
			tcp(gateway, dns, 53, true)
			conns = append(conns, conn{gateway, dns, "UDP", 53, true})
			tcp(gateway, database, 5432, true)
			tcp(gateway, agent, 8080, false)
			tcp(gateway, operator, 9090, false)
			// The migrate Job: DNS and Postgres only.
			tcp(migrate, database, 5432, true)
			conns = append(conns, conn{migrate, dns, "UDP", 53, true})
			tcp(migrate, internet, 443, false)
			tcp(migrate, gateway, 8081, false)
			// Postgres only from the gateway (and the migrate Job). Outside the cluster
			// (a managed database) only this namespace is the manifests' to close; the
			// database's own network rules close the rest (docs/kubernetes.md).
			tcp(stray, database, 5432, false)
			if inCluster {
				tcp(stranger, database, 5432, false)
				tcp(operator, database, 5432, false)
				tcp(cnpgOperator, database, 8000, true)
				tcp(cnpgOperator, database, 5432, false)
			}
			// A stray pod in the namespace is isolated too (the default deny).
			tcp(stray, internet, 443, false)
			tcp(stray, gateway, 8081, false)

			for _, cn := range conns {
				name := fmt.Sprintf("%s to %s %s/%d", cn.src.Name, cn.dst.Name, cn.proto, cn.port)
				if got := net.allowed(cn.src, cn.dst, cn.proto, cn.port); got != cn.want {
					t.Errorf("%s: allowed=%v, want %v", name, got, cn.want)
				}
			}

			// Every pod of the namespace is isolated both ways by a policy with no rule
			// (a later edit that loosens a role's policy cannot open a stray pod).
			for _, dir := range []string{"Ingress", "Egress"} {
				if len(net.selecting(stray, dir)) == 0 {
					t.Errorf("no %s policy selects every pod of %s: the default deny is missing", dir, k8sNamespace)
				}
			}
			// An agent's egress rules name pods only: no ipBlock, no namespace.
			for _, p := range net.selecting(agent, "Egress") {
				for _, r := range p.Spec.Egress {
					for _, peer := range r.To {
						if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil {
							t.Errorf("NetworkPolicy %s lets agents reach %+v: agents reach gateway pods only", p.Name, peer)
						}
					}
				}
			}
		})
	}
}
