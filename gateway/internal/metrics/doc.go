// Package metrics holds the Prometheus metric definitions of the MCP hub:
// tool calls by server, tool and decision, their outcomes and latency,
// refused agent authentications and external-server restarts. Constructors
// take a prometheus.Registerer (the registry the ops port serves); every
// metric name starts with "ironcurtain_".
package metrics
