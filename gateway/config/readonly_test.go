package config

import (
	"reflect"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

func TestReadOnlyDirs(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    []string
		wantErr string
	}{
		{name: "absent", yaml: "sandbox: /srv/work\n", want: nil},
		{name: "absolute, relative and home", yaml: "sandbox: /srv/work\nservers:\n  filesystem:\n    read_only_dirs: [/srv/docs, ref, ~/manuals/]\n  fetch:\n    allowed_domains: [\"*\"]\n",
			want: []string{"/srv/docs", "/cfg/ref", "/home/test/manuals"}},
		{name: "not on another server", yaml: "servers:\n  git:\n    read_only_dirs: [/srv/docs]\n",
			wantErr: "gateway.yaml: servers.git.read_only_dirs: only the built-in filesystem server"},
		{name: "the root", yaml: "servers:\n  filesystem:\n    read_only_dirs: [/]\n",
			wantErr: "servers.filesystem.read_only_dirs[0]: the root directory"},
		{name: "inside the sandbox", yaml: "sandbox: /srv/work\nservers:\n  filesystem:\n    read_only_dirs: [/srv/work/vendor]\n",
			wantErr: `servers.filesystem.read_only_dirs[0]: "/srv/work/vendor" overlaps the sandbox`},
		{name: "containing the sandbox", yaml: "sandbox: /srv/work\nservers:\n  filesystem:\n    read_only_dirs: [/srv]\n",
			wantErr: "overlaps the sandbox"},
		{name: "a sibling with the sandbox as prefix is fine", yaml: "sandbox: /srv/work\nservers:\n  filesystem:\n    read_only_dirs: [/srv/work2]\n  fetch:\n    allowed_domains: [\"*\"]\n",
			want: []string{"/srv/work2"}},
		{name: "duplicate", yaml: "servers:\n  filesystem:\n    read_only_dirs: [/srv/docs, /srv/docs/]\n",
			wantErr: "servers.filesystem.read_only_dirs[1]: duplicate directory (also read_only_dirs[0])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", "/home/test")
			c, err := Parse("/cfg/gateway.yaml", withFetch(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ReadOnlyDirs(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ReadOnlyDirs = %q, want %q", got, tt.want)
			}
			s := c.PolicySettings()
			if !reflect.DeepEqual(s.ReadOnlyDirs, tt.want) {
				t.Fatalf("policy settings read-only dirs = %q, want %q", s.ReadOnlyDirs, tt.want)
			}
			if !reflect.DeepEqual(s.ConfinedServers, policy.BuiltinConfinedServers()) {
				t.Fatalf("confined servers = %q: the built-in servers are confined to the sandbox", s.ConfinedServers)
			}
		})
	}
}
