package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"},
	}}
	tests := []struct {
		name           string
		bi             *debug.BuildInfo
		linkV, linkRev string
		want           Info
		str            string
	}{
		{name: "no build info", want: Info{Version: "dev", GoVersion: runtime.Version()}, str: "dev " + runtime.Version()},
		{name: "vcs", bi: bi, want: Info{Version: "dev", Revision: "0123abcd", Modified: true, GoVersion: "go1.26.0"},
			str: "dev (revision 0123abcd, modified) go1.26.0"},
		{name: "module version", bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}},
			want: Info{Version: "v1.2.3", GoVersion: "go1.26.0"}, str: "v1.2.3 go1.26.0"},
		{name: "link time wins", bi: bi, linkV: "v2.0.0", linkRev: "feed",
			want: Info{Version: "v2.0.0", Revision: "feed", Modified: true, GoVersion: "go1.26.0"}, str: "v2.0.0 (revision feed, modified) go1.26.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := From(tt.bi, tt.linkV, tt.linkRev)
			if got != tt.want {
				t.Fatalf("From = %+v, want %+v", got, tt.want)
			}
			if got.String() != tt.str {
				t.Fatalf("String = %q, want %q", got.String(), tt.str)
			}
		})
	}
}

func TestGet(t *testing.T) {
	i := Get()
	if i.Version == "" || !strings.HasPrefix(i.GoVersion, "go") {
		t.Fatalf("Get = %+v", i)
	}
}
