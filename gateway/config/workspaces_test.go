package config

import (
	"testing"
)

func TestSessionWorkspacesSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string
		want    SessionWorkspacesConfig
	}{
		{name: "absent: off (minted sessions share the sandbox)", yaml: "mcp: {}\n"},
		{name: "set", yaml: "session_workspaces:\n  root: /var/lib/ic/ws\n  keep: true\n",
			want: SessionWorkspacesConfig{Root: "/var/lib/ic/ws", Keep: true}},
		{name: "relative root", yaml: "session_workspaces:\n  root: ws\n", wantErr: []string{"session_workspaces.root", "absolute"}},
		{name: "root directory", yaml: "session_workspaces:\n  root: /\n", wantErr: []string{"session_workspaces.root"}},
		{name: "keep without root", yaml: "session_workspaces:\n  keep: true\n", wantErr: []string{"session_workspaces.keep"}},
		{name: "inside the sandbox", yaml: "sandbox: /workspace\nsession_workspaces:\n  root: /workspace/sessions\n", wantErr: []string{"session_workspaces.root", "overlap"}},
		{name: "contains the sandbox", yaml: "sandbox: /srv/ws\nsession_workspaces:\n  root: /srv\n", wantErr: []string{"session_workspaces.root", "overlap"}},
		{name: "the sandbox", yaml: "session_workspaces:\n  root: /workspace\n", wantErr: []string{"session_workspaces.root", "overlap"}},
		{name: "unknown key", yaml: "session_workspaces:\n  owner: 1000\n", wantErr: []string{"owner"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "/cfg/gateway.yaml", withFetch(tt.yaml), tt.wantErr)
			if c == nil {
				return
			}
			if c.SessionWorkspaces != tt.want {
				t.Fatalf("session_workspaces = %+v, want %+v", c.SessionWorkspaces, tt.want)
			}
			if got := c.PolicySettings().SessionSandboxRoot; got != tt.want.Root {
				t.Fatalf("PolicySettings().SessionSandboxRoot = %q", got)
			}
		})
	}
}
