package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/buildinfo"
)

// BuildInfo returns the ironcurtain_build_info gauge: 1, labelled with the
// running build's version, VCS revision and Go version, so a dashboard or a
// bug report can say which build answered.
func BuildInfo(info buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ironcurtain_build_info",
		Help: "The running gateway's build: version, VCS revision (with -modified when the tree was) and Go version; always 1.",
	}, []string{"version", "revision", "go"})
	rev := info.Revision
	if info.Modified {
		rev += "-modified"
	}
	g.WithLabelValues(info.Version, rev, info.GoVersion).Set(1)
	return g
}
