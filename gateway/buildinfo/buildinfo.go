// Package buildinfo says which build is running: the module version, the
// VCS revision and whether the tree was modified, and the Go version, read
// from runtime/debug.ReadBuildInfo. `ironcurtain version`, /healthz, the
// serve start-up log line and the ironcurtain_build_info metric all report
// it, and so does `ironcurtain-compile version` (the compiler imports this
// package; the agent, which imports nothing of the gateway, keeps a copy).
//
// Builds without VCS information (a Docker build context without .git) set
// the version and revision at link time:
//
//	-ldflags "-X ironcurtain.dev/gateway/buildinfo.version=v1.2.3
//	          -X ironcurtain.dev/gateway/buildinfo.revision=0123abc"
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time (-ldflags -X); empty means "from the build info".
var (
	version  string
	revision string
)

// Info describes one build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go"`
}

// Get returns the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return From(bi, version, revision)
}

// From builds an Info from a build info (nil: none) and the link-time
// overrides (empty: none).
func From(bi *debug.BuildInfo, linkVersion, linkRevision string) Info {
	info := Info{Version: "dev", GoVersion: runtime.Version()}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if linkVersion != "" {
		info.Version = linkVersion
	}
	if linkRevision != "" {
		info.Revision = linkRevision
	}
	return info
}

// String is the one-line form: "v1.2.3 (revision 0123abc, modified) go1.26.0".
func (i Info) String() string {
	rev := ""
	switch {
	case i.Revision != "" && i.Modified:
		rev = fmt.Sprintf(" (revision %s, modified)", i.Revision)
	case i.Revision != "":
		rev = fmt.Sprintf(" (revision %s)", i.Revision)
	case i.Modified:
		rev = " (modified)"
	}
	return i.Version + rev + " " + i.GoVersion
}
