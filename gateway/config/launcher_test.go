package config

import (
	"strings"
	"testing"
)

func TestImageServers(t *testing.T) {
	const launcher = "launcher: {socket: /run/l.sock, token_file: /run/l.token}\n"
	tests := []struct {
		name, yaml, want string // want "" : valid
	}{
		{"image server", launcher + "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n  notes:\n    image: ex/notes@sha256:1\n    egress: {allowed_hosts: [api.notes.example]}\n", ""},
		{"image and command", launcher + "servers:\n  notes:\n    image: ex/notes\n    command: /bin/notes\n", "servers.notes.image: and command are exclusive"},
		{"image with args", launcher + "servers:\n  notes:\n    image: ex/notes\n    args: [x]\n", "servers.notes.args: an image server's command"},
		{"image with env", launcher + "servers:\n  notes:\n    image: ex/notes\n    env: {A: b}\n", "servers.notes.env: an image server's environment"},
		{"image without launcher", "servers:\n  notes:\n    image: ex/notes\n", "launcher.socket: is required"},
		{"built-in name", launcher + "servers:\n  git:\n    image: ex/git\n", "servers.git.image"},
		{"bad name", launcher + "servers:\n  No__tes:\n    image: ex/notes\n", "servers.No__tes"},
		{"image with spaces", launcher + "servers:\n  notes:\n    image: \"ex/notes --privileged\"\n", "servers.notes.image: must be an image reference"},
		{"egress without image", "servers:\n  notes:\n    command: /bin/notes\n    egress: {allowed_hosts: [x.example]}\n", "servers.notes.egress.allowed_hosts: is set but image is not"},
		{"bad egress pattern", launcher + "servers:\n  notes:\n    image: ex/notes\n    egress: {allowed_hosts: [\"*.\"]}\n", "servers.notes.egress.allowed_hosts[0]"},
		{"relative socket", "launcher: {socket: l.sock, token_file: /t}\n", "launcher.socket: must be an absolute path"},
		{"socket without token", "launcher: {socket: /l.sock}\n", "launcher.token_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/cfg/gateway.yaml", withFetch(tt.yaml))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(c.ImageServers(), ","); got != "notes" || !c.Servers["notes"].External() {
					t.Fatalf("ImageServers = %q", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
