package opscli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
)

func TestResource(t *testing.T) {
	tests := []struct {
		name string
		esc  escalation.Escalation
		want string
	}{
		{name: "egress domain", esc: escalation.Escalation{Kind: escalation.KindEgress, Resource: "example.com"}, want: "example.com"},
		{name: "read path", esc: escalation.Escalation{Args: json.RawMessage(`{"path":"/etc/hosts"}`)}, want: "/etc/hosts"},
		{name: "move", esc: escalation.Escalation{Args: json.RawMessage(`{"destination":"/w/b","source":"/w/a"}`)}, want: "/w/a /w/b"},
		{name: "git paths", esc: escalation.Escalation{Args: json.RawMessage(`{"path":"/w/repo","paths":["/w/repo/x","/w/repo/y"]}`)}, want: "/w/repo /w/repo/x /w/repo/y"},
		{name: "blame file", esc: escalation.Escalation{Args: json.RawMessage(`{"file":"/w/r/main.go","path":"/w/r"}`)}, want: "/w/r /w/r/main.go"},
		{name: "own resource wins", esc: escalation.Escalation{Resource: "/w/dir", Args: json.RawMessage(`{"path":"/w/dir/f"}`)}, want: "/w/dir"},
		{name: "no paths", esc: escalation.Escalation{Args: json.RawMessage(`{"remote":"origin"}`)}, want: ""},
		{name: "truncated value skipped", esc: escalation.Escalation{Args: json.RawMessage(`{"path":{"$truncated":{"bytes":9000}}}`)}, want: ""},
		{name: "not an object", esc: escalation.Escalation{Args: json.RawMessage(`[1]`)}, want: ""},
		{name: "terminal escapes shown, not sent", esc: escalation.Escalation{Args: json.RawMessage(`{"path":"/w/\u001b[2Jx"}`)}, want: `"/w/\x1b[2Jx"`},
		{name: "bidi override shown", esc: escalation.Escalation{Args: json.RawMessage(`{"path":"/w/\u202egpj.exe"}`)}, want: `"/w/\u202egpj.exe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resource(tt.esc); got != tt.want {
				t.Fatalf("resource = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEscalationsListShowsPaths: the RESOURCE column of `escalations list`
// holds the paths of a path escalation (it was empty).
func TestEscalationsListShowsPaths(t *testing.T) {
	list := []escalation.Escalation{{ID: "esc-1", Status: "pending", SessionID: "s1", Kind: escalation.KindToolCall,
		Server: "filesystem", Tool: "read_file", Args: json.RawMessage(`{"path":"/etc/passwd"}`), Reason: "outside the sandbox",
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/escalations" || r.Header.Get("Authorization") != "Bearer "+opToken {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"escalations": list})
	}))
	defer srv.Close()
	code, out, errOut := run(t, Escalations, map[string]string{EnvOpsURL: srv.URL, EnvOperatorToken: opToken}, "list")
	if code != 0 {
		t.Fatalf("list: %d %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("list output %q", out)
	}
	col := strings.Index(lines[0], "RESOURCE")
	if col < 0 || len(lines[1]) <= col || !strings.HasPrefix(lines[1][col:], "/etc/passwd") {
		t.Fatalf("RESOURCE column of %q is not the path", out)
	}
}
