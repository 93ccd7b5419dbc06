package config

import (
	"strings"
	"testing"
	"time"
)

func TestGitHTTPValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		http GitHTTPConfig
		want string
	}{
		{name: "defaults", http: GitHTTPConfig{}},
		{name: "set", http: GitHTTPConfig{MaxPackBytes: 1 << 20, MaxObjects: 10, MaxRefs: 2, Timeout: time.Minute}},
		{name: "negative pack", http: GitHTTPConfig{MaxPackBytes: -1}, want: "http.max_pack_bytes"},
		{name: "negative objects", http: GitHTTPConfig{MaxObjects: -1}, want: "http.max_objects"},
		{name: "negative refs", http: GitHTTPConfig{MaxRefs: -1}, want: "http.max_refs"},
		{name: "negative timeout", http: GitHTTPConfig{Timeout: -time.Second}, want: "http.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := GitConfig{HTTP: tc.http}
			err := g.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
