package gate

import (
	"path"
	"strconv"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

func roles(rs ...policy.Role) policy.ArgSpec { return policy.ArgSpec{Default: rs} }

var moveFile = policy.ToolAnnotation{Server: "files", Tool: "move_file", Args: []policy.ArgAnnotation{
	{Name: "source", Spec: roles(policy.RoleReadPath, policy.RoleDeletePath)},
	{Name: "destination", Spec: roles(policy.RoleWritePath)},
}}

func TestPathResource(t *testing.T) {
	many := make([]any, 40)
	for i := range many {
		many[i] = "/w/f" + strconv.Itoa(i)
	}
	tests := []struct {
		name        string
		ann         policy.ToolAnnotation
		agent, pol  map[string]any
		want        string
		wantContain []string
	}{
		{
			name:  "move_file: both paths, with their roles, as the policy resolved them",
			ann:   moveFile,
			agent: map[string]any{"source": "a.txt", "destination": "sub/b.txt"},
			pol:   map[string]any{"source": "/w/a.txt", "destination": "/w/sub/b.txt"},
			want:  `source (read-path+delete-path): "/w/a.txt"; destination (write-path): "/w/sub/b.txt"`,
		},
		{
			name:  "no policy form: the agent's values",
			ann:   moveFile,
			agent: map[string]any{"source": "/w/a", "destination": "/w/b"},
			want:  `source (read-path+delete-path): "/w/a"; destination (write-path): "/w/b"`,
		},
		{
			name:  "one path is still labelled (never a bare path: no directory scope)",
			ann:   policy.ToolAnnotation{Args: []policy.ArgAnnotation{{Name: "path", Spec: roles(policy.RoleWritePath)}}},
			agent: map[string]any{"path": "/w/x"},
			want:  `path (write-path): "/w/x"`,
		},
		{
			name: "a list of paths: each one",
			ann:  policy.ToolAnnotation{Args: []policy.ArgAnnotation{{Name: "paths", Spec: roles(policy.RoleReadPath)}}},
			pol:  map[string]any{"paths": []any{"/w/a", "/w/b"}},
			want: `paths[0] (read-path): "/w/a"; paths[1] (read-path): "/w/b"`,
		},
		{
			name:  "non-path roles are not paths",
			ann:   policy.ToolAnnotation{Args: []policy.ArgAnnotation{{Name: "url", Spec: roles(policy.RoleFetchURL)}, {Name: "msg", Spec: roles(policy.RoleCommitMessage)}}},
			agent: map[string]any{"url": "https://example.com/", "msg": "hi"},
			want:  "",
		},
		{
			name: "a conditional role applies as the engine resolves it",
			ann: policy.ToolAnnotation{Args: []policy.ArgAnnotation{
				{Name: "mode", Spec: roles(policy.RoleNone)},
				{Name: "target", Spec: policy.ArgSpec{Default: []policy.Role{policy.RoleReadPath}, When: []policy.ConditionalRoles{
					{Condition: policy.ArgCondition{Arg: "mode", Equals: "delete"}, Roles: []policy.Role{policy.RoleDeletePath}},
				}}},
			}},
			agent: map[string]any{"mode": "delete", "target": "/w/t"},
			want:  `target (delete-path): "/w/t"`,
		},
		{
			name:  "hostile text is quoted: a bidi override, a newline and a fake second entry stay inside one path",
			ann:   moveFile,
			agent: map[string]any{"source": "/w/a\u202e\"; destination (write-path): \"/w/ok", "destination": "/w/b\n"},
			want:  `source (read-path+delete-path): "/w/a\u202e\"; destination (write-path): \"/w/ok"; destination (write-path): "/w/b\n"`,
		},
		{
			name:        "bounded: at most 16 paths, the rest counted",
			ann:         policy.ToolAnnotation{Args: []policy.ArgAnnotation{{Name: "paths", Spec: roles(policy.RoleReadPath)}}},
			agent:       map[string]any{"paths": many},
			wantContain: []string{`paths[15] (read-path): "/w/f15"`, "; 24 more not shown (see the arguments)"},
		},
		{
			name:        "bounded: a huge path is counted, not shown",
			ann:         policy.ToolAnnotation{Args: []policy.ArgAnnotation{{Name: "path", Spec: roles(policy.RoleReadPath)}}},
			agent:       map[string]any{"path": "/" + strings.Repeat("a", 10000)},
			wantContain: []string{"1 more not shown (see the arguments)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := pathResource(tc.ann, tc.agent, tc.pol)
			if tc.wantContain == nil && got != tc.want {
				t.Fatalf("pathResource =\n %s\nwant\n %s", got, tc.want)
			}
			for _, w := range tc.wantContain {
				if !strings.Contains(got, w) {
					t.Fatalf("pathResource = %q, want it to contain %q", got, w)
				}
			}
			if len(got) > maxResourceBytes+64 {
				t.Fatalf("pathResource is %d bytes", len(got))
			}
		})
	}
}

// FuzzPathResource: whatever the agent sends, every shown path is quoted
// whole, and the resource is never something "approve similar" could scope
// by directory or domain (which would also cover the call's other paths).
func FuzzPathResource(f *testing.F) {
	f.Add("/w/a", "/w/b")
	f.Add("/", "example.com")
	f.Add("a\"; destination (write-path): \"/etc", "\u202e\x00\n")
	f.Fuzz(func(t *testing.T, src, dst string) {
		got := pathResource(moveFile, map[string]any{"source": src, "destination": dst}, nil)
		for _, p := range []string{src, dst} {
			if q := strconv.Quote(p); len(q) < maxResourceBytes/2 && !strings.Contains(got, q) {
				t.Fatalf("resource %q does not show %q", got, q)
			}
		}
		if strings.HasPrefix(got, "/") && path.Clean(got) == got {
			t.Fatalf("resource %q is a bare path", got)
		}
		if got != "" && !strings.ContainsAny(got, "/ *@:") {
			t.Fatalf("resource %q could be taken for a domain", got)
		}
	})
}
