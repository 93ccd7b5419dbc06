package opscli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
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

// pagedServer serves GET /v1/escalations in pages of pageSize, following
// the cursor, as the ops API does; failAfter > 0 ends the page holding that
// row with an error in the body. It records the limits it was asked for.
func pagedServer(t *testing.T, total, pageSize, failAfter int, limits *[]string) *httptest.Server {
	t.Helper()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/escalations" || r.Header.Get("Authorization") != "Bearer "+opToken {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		*limits = append(*limits, r.URL.Query().Get("limit"))
		from := 0
		if c := r.URL.Query().Get("cursor"); c != "" {
			cur, err := audit.ParseCursor(c)
			if err != nil {
				http.Error(w, "bad cursor", http.StatusBadRequest)
				return
			}
			fmt.Sscanf(cur.CallID, "esc-%d", &from)
			from++
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		n := min(pageSize, limit, total-from)
		page := opsapi.EscalationPage{Escalations: []escalation.Escalation{}}
		for i := from; i < from+n; i++ {
			if failAfter > 0 && i == failAfter {
				page.Error = &opsapi.ErrorDetail{Code: opsapi.CodeNotReady, Message: "the database became unavailable part way; retry later"}
				break
			}
			page.Escalations = append(page.Escalations, escalation.Escalation{ID: fmt.Sprintf("esc-%d", i), Status: "pending", SessionID: "s1",
				Kind: escalation.KindToolCall, Server: "filesystem", Tool: "write_file", CreatedAt: base.Add(time.Duration(i) * time.Second),
				Args: json.RawMessage(fmt.Sprintf(`{"path":"/w/f%d"}`, i))})
		}
		if page.Error == nil && from+n < total && n > 0 {
			last := page.Escalations[n-1]
			page.Next = last.Cursor().String()
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
}

// TestEscalationsListStreams: `escalations list` prints every page of a
// listing the ops API ended early (byte bound), asks only for the rows it
// still wants, prints --json as one array, and reports an error the API
// put in the body after the rows it did print.
func TestEscalationsListStreams(t *testing.T) {
	tests := []struct {
		name       string
		total      int
		pageSize   int
		failAfter  int
		args       []string
		wantRows   int
		wantLimits string
		wantCode   int
	}{
		{name: "three pages", total: 7, pageSize: 3, args: []string{"list"}, wantRows: 7, wantLimits: "100,97,94"},
		{name: "limit across pages", total: 20, pageSize: 3, args: []string{"list", "--limit", "5"}, wantRows: 5, wantLimits: "5,2"},
		{name: "json array over pages", total: 5, pageSize: 2, args: []string{"list", "--json"}, wantRows: 5, wantLimits: "100,98,96"},
		{name: "empty json is an array", total: 0, pageSize: 2, args: []string{"list", "--json"}, wantRows: 0, wantLimits: "100"},
		{name: "error after rows", total: 9, pageSize: 4, failAfter: 6, args: []string{"list"}, wantRows: 6, wantLimits: "100,96", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var limits []string
			srv := pagedServer(t, tt.total, tt.pageSize, tt.failAfter, &limits)
			defer srv.Close()
			code, out, errOut := run(t, Escalations, map[string]string{EnvOpsURL: srv.URL, EnvOperatorToken: opToken}, tt.args...)
			if (code != 0) != (tt.wantCode != 0) {
				t.Fatalf("exit %d, want %d: %q %q", code, tt.wantCode, out, errOut)
			}
			if got := strings.Join(limits, ","); got != tt.wantLimits {
				t.Fatalf("limits asked = %s, want %s", got, tt.wantLimits)
			}
			var ids []string
			if slices.Contains(tt.args, "--json") {
				var list []escalation.Escalation
				if err := json.Unmarshal([]byte(out), &list); err != nil || list == nil {
					t.Fatalf("--json output is not one array: %v\n%s", err, out)
				}
				for _, e := range list {
					ids = append(ids, e.ID)
				}
			} else {
				for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
					if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "esc-") {
						ids = append(ids, f[0])
					}
				}
			}
			if len(ids) != tt.wantRows {
				t.Fatalf("printed %d escalations %v, want %d:\n%s", len(ids), ids, tt.wantRows, out)
			}
			for i, id := range ids {
				if id != fmt.Sprintf("esc-%d", i) {
					t.Fatalf("row %d is %s: %v", i, id, ids)
				}
			}
			if tt.wantCode != 0 && !strings.Contains(errOut, "unavailable") {
				t.Fatalf("stderr %q does not say what failed", errOut)
			}
		})
	}
}
