package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Defaults of the listener limits (agent.* and ops.*). The agent API may hold many
// long-lived calls and event streams; the ops API serves a few operators and must never be
// starved by the agent's listener, so its caps are separate.
const (
	DefaultAgentMaxConnections          = 4096
	DefaultAgentMaxConnectionsPerClient = 1024
	DefaultOpsMaxConnections            = 256
	DefaultOpsMaxConnectionsPerClient   = 64
	DefaultListenerIdleTimeout          = 60 * time.Second
	DefaultStreamMaxDuration            = time.Hour
)

// ListenerLimits bound what clients can hold on one listener (agent or ops):
//
//	max_connections: 4096             # open at once; idle ones give way to new ones
//	max_connections_per_client: 1024  # per client address
//	idle_timeout: 60s                 # a keep-alive connection idle this long is closed
type ListenerLimits struct {
	MaxConnections          int           `yaml:"max_connections"`
	MaxConnectionsPerClient int           `yaml:"max_connections_per_client"`
	IdleTimeout             time.Duration `yaml:"idle_timeout"`
}

// withDefaults fills zero fields.
func (l ListenerLimits) withDefaults(maxConns, perClient int) ListenerLimits {
	if l.MaxConnections == 0 {
		l.MaxConnections = maxConns
	}
	if l.MaxConnectionsPerClient == 0 {
		l.MaxConnectionsPerClient = min(perClient, l.MaxConnections)
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultListenerIdleTimeout
	}
	return l
}

// validate reports bad fields (zero means the default).
func (l ListenerLimits) validate() []error {
	var errs []error
	if l.MaxConnections < 0 || l.MaxConnections > 1<<20 {
		errs = append(errs, Errorf("max_connections", "must be between 1 and 1048576 (0: the default), not %d", l.MaxConnections))
	}
	if l.MaxConnectionsPerClient < 0 {
		errs = append(errs, Errorf("max_connections_per_client", "must be > 0 (0: the default), not %d", l.MaxConnectionsPerClient))
	}
	if l.MaxConnections > 0 && l.MaxConnectionsPerClient > l.MaxConnections {
		errs = append(errs, Errorf("max_connections_per_client", "(%d) must not exceed max_connections (%d)", l.MaxConnectionsPerClient, l.MaxConnections))
	}
	if l.IdleTimeout < 0 || (l.IdleTimeout > 0 && l.IdleTimeout < time.Second) || l.IdleTimeout > time.Hour {
		errs = append(errs, Errorf("idle_timeout", "must be between 1s and 1h (0: the default %s), not %s", DefaultListenerIdleTimeout, l.IdleTimeout))
	}
	return errs
}

// AgentLimits returns the agent listener's limits with defaults applied.
func (a *AgentConfig) AgentLimits() ListenerLimits {
	return a.Limits.withDefaults(DefaultAgentMaxConnections, DefaultAgentMaxConnectionsPerClient)
}

// StreamMax returns how long one MCP event stream (GET /mcp) may stay open; the client
// opens a new one after it ends.
func (a *AgentConfig) StreamMax() time.Duration {
	if a.StreamMaxDuration == 0 {
		return DefaultStreamMaxDuration
	}
	return a.StreamMaxDuration
}

// OpsLimits returns the ops listener's limits with defaults applied.
func (o *OpsConfig) OpsLimits() ListenerLimits {
	return o.Limits.withDefaults(DefaultOpsMaxConnections, DefaultOpsMaxConnectionsPerClient)
}

// UnsafeSettings returns the gateway.yaml paths of every unsafe_ setting that is on (not
// its zero value), sorted, so that serve can warn about each at start.
func (c *Config) UnsafeSettings() []string {
	var out []string
	collectUnsafe(reflect.ValueOf(c).Elem(), "", &out)
	sort.Strings(out)
	return out
}

func collectUnsafe(v reflect.Value, path string, out *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectUnsafe(v.Elem(), path, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			inline := strings.Contains(f.Tag.Get("yaml"), ",inline")
			p := path
			if !inline {
				if name == "" || name == "-" {
					continue
				}
				p = joinPath(path, name)
			}
			fv := v.Field(i)
			if strings.HasPrefix(name, "unsafe_") && !fv.IsZero() {
				*out = append(*out, p)
				continue
			}
			collectUnsafe(fv, p, out)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			collectUnsafe(iter.Value(), joinPath(path, fmt.Sprint(iter.Key().Interface())), out)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			collectUnsafe(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}
