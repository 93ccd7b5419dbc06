package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestApplyTokenFile(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "agent-token")
	if err := os.WriteFile(tokenFile, []byte("ic-agent-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "no file", env: map[string]string{envToken: "t", "HTTPS_PROXY": "http://gateway:3128"},
			want: map[string]string{envToken: "t", "HTTPS_PROXY": "http://gateway:3128"}},
		{name: "file", env: map[string]string{envTokenFile: tokenFile, "HTTPS_PROXY": "http://gateway:3128", "HTTP_PROXY": "http://gateway:3128", "NO_PROXY": "gateway"},
			want: map[string]string{envToken: "ic-agent-secret", "HTTPS_PROXY": "http://agent:ic-agent-secret@gateway:3128",
				"HTTP_PROXY": "http://agent:ic-agent-secret@gateway:3128", "NO_PROXY": "gateway"}},
		{name: "proxy with credentials kept", env: map[string]string{envTokenFile: tokenFile, "HTTPS_PROXY": "http://other:pw@gateway:3128"},
			want: map[string]string{envToken: "ic-agent-secret", "HTTPS_PROXY": "http://other:pw@gateway:3128"}},
		{name: "both", env: map[string]string{envTokenFile: tokenFile, envToken: "t"}, wantErr: "both set"},
		{name: "missing file", env: map[string]string{envTokenFile: filepath.Join(dir, "nope")}, wantErr: "reading the agent token"},
		{name: "empty file", env: map[string]string{envTokenFile: empty}, wantErr: "no single-line token"},
		{name: "bad proxy", env: map[string]string{envTokenFile: tokenFile, "HTTPS_PROXY": "gateway:3128"}, wantErr: "HTTPS_PROXY is not a proxy URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			err := applyTokenFile(func(k string) string { return env[k] }, func(k, v string) error { env[k] = v; return nil })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "ic-agent-secret") {
					t.Fatalf("the error carries the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if env[k] != v {
					t.Errorf("%s = %q, want %q", k, env[k], v)
				}
			}
		})
	}
}
