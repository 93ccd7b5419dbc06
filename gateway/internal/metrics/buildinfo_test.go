package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/buildinfo"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(BuildInfo(buildinfo.Info{Version: "v1.2.3", Revision: "0123abc", Modified: true, GoVersion: "go1.26.0"}))
	want := `# HELP ironcurtain_build_info The running gateway's build: version, VCS revision (with -modified when the tree was) and Go version; always 1.
# TYPE ironcurtain_build_info gauge
ironcurtain_build_info{go="go1.26.0",revision="0123abc-modified",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ironcurtain_build_info"); err != nil {
		t.Fatal(err)
	}
}
