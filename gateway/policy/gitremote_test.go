package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseGitRemoteURL(t *testing.T) {
	tests := []struct {
		raw     string
		scheme  string
		user    string
		host    string
		port    int
		domain  string
		wantErr string
	}{
		{raw: "git@github.com:acme/app.git", scheme: "ssh", user: "git", host: "github.com", domain: "github.com/acme/app"},
		{raw: "github.com:acme/app", scheme: "ssh", host: "github.com", domain: "github.com/acme/app"},
		{raw: "git@GitHub.COM:acme/app/", scheme: "ssh", user: "git", host: "github.com", domain: "github.com/acme/app"},
		{raw: "git@evil.example:github.com/acme/app", scheme: "ssh", user: "git", host: "evil.example", domain: "evil.example/github.com/acme/app"},
		{raw: "[git@evil.example:2222]:acme/app", scheme: "ssh", user: "git", host: "evil.example", port: 2222, domain: "evil.example/acme/app"},
		{raw: "git@[evil.example:2222]:acme/app", scheme: "ssh", user: "git", host: "evil.example", port: 2222, domain: "evil.example/acme/app"},
		{raw: "[::1]:acme/app", scheme: "ssh", host: "::1", domain: "::1/acme/app"},
		{raw: "ssh://git@github.com/acme/app.git", scheme: "ssh", user: "git", host: "github.com", domain: "github.com/acme/app"},
		{raw: "SSH://git@github.com:22/acme/app", scheme: "ssh", user: "git", host: "github.com", port: 22, domain: "github.com/acme/app"},
		{raw: "ssh://[2001:db8::1]:2222/x", scheme: "ssh", host: "2001:db8::1", port: 2222, domain: "2001:db8::1/x"},
		{raw: "https://github.com/acme/app.git", scheme: "https", host: "github.com", domain: "github.com/acme/app"},
		{raw: "https://github.com", scheme: "https", host: "github.com", domain: "github.com"},
		{raw: "https://github.com:8443/acme/app", scheme: "https", host: "github.com", port: 8443, domain: "github.com/acme/app"},
		{raw: "https://①②⑦.⓪.⓪.①/x", scheme: "https", host: "127.0.0.1", domain: "127.0.0.1/x"},
		{raw: "git@0x7f000001:x", scheme: "ssh", user: "git", host: "127.0.0.1", domain: "127.0.0.1/x"},
		{raw: "git@github.com@evil.example:acme/app", wantErr: "user name"},
		{raw: "ssh://git@github.com@evil.example/acme/app", wantErr: "user name"},
		{raw: "ssh://user:pass@github.com/x", wantErr: "user name"},
		{raw: "https://token@github.com/acme/app", wantErr: "credentials"},
		{raw: "https://x:ghp_abc@github.com/acme/app", wantErr: "***@"},
		{raw: "ext::sh -c id", wantErr: "space"},
		{raw: "ext::sh", wantErr: `"ext" transport`},
		{raw: "fd::3", wantErr: `"fd" transport`},
		{raw: "fd::3,4", wantErr: "transport"},
		{raw: "persistent-https::x", wantErr: "transport"},
		{raw: "file:///etc", wantErr: `scheme "file"`},
		{raw: "git://github.com/x", wantErr: `scheme "git"`},
		{raw: "http://github.com/x", wantErr: `scheme "http"`},
		{raw: "git+ssh://github.com/x", wantErr: `scheme "git+ssh"`},
		{raw: "/tmp/repo", wantErr: "local path"},
		{raw: "./repo", wantErr: "local path"},
		{raw: "../repo", wantErr: "local path"},
		{raw: "repo", wantErr: "local path"},
		{raw: "dir/x:y", wantErr: "local path"},
		{raw: "-oProxyCommand=x:y", wantErr: "starts with '-'"},
		{raw: "git@github.com:-x", wantErr: "starts with '-'"},
		{raw: "git@github.com:", wantErr: "empty repository path"},
		{raw: "git@github.com:a/../b", wantErr: "'..'"},
		{raw: "https://github.com/a/%2e%2e/b", wantErr: "percent"},
		{raw: "https://github.com/a?x=1", wantErr: "query"},
		{raw: "https://github.com\\@evil/x", wantErr: "backslash"},
		{raw: "git@github.com:a b", wantErr: "space"},
		{raw: "git@github..com:a", wantErr: "remote"},
		{raw: "git@github.com:99999:a", scheme: "ssh", user: "git", host: "github.com", domain: "github.com/99999:a"},
		{raw: "[git@evil.example:2222:acme/app", wantErr: "bracketed"},
		{raw: "", wantErr: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			r, err := ParseGitRemoteURL(tt.raw)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("accepted as %+v; want error containing %q", r, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "ghp_abc") {
					t.Fatalf("error leaks a credential: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Scheme != tt.scheme || r.User != tt.user || r.Host.String() != tt.host || r.Port != tt.port || r.Domain() != tt.domain {
				t.Fatalf("got %s %q %s %d %s, want %s %q %s %d %s", r.Scheme, r.User, r.Host, r.Port, r.Domain(), tt.scheme, tt.user, tt.host, tt.port, tt.domain)
			}
			again, err := ParseGitRemoteURL(r.URL())
			if err != nil || again.Domain() != r.Domain() || again.Port != r.Port || again.User != r.User {
				t.Fatalf("URL() %q does not parse back to the same remote: %+v, %v", r.URL(), again, err)
			}
		})
	}
}

func TestParsePushRefspec(t *testing.T) {
	tests := []struct {
		spec    string
		current string
		force   bool
		del     bool
		src     string
		dst     string
		wantErr string
	}{
		{spec: "feature", src: "refs/heads/feature", dst: "refs/heads/feature"},
		{spec: "feature:topic", src: "refs/heads/feature", dst: "refs/heads/topic"},
		{spec: "HEAD", current: "work", src: "refs/heads/work", dst: "refs/heads/work"},
		{spec: "@", current: "work", src: "refs/heads/work", dst: "refs/heads/work"},
		{spec: "HEAD", wantErr: "HEAD is not on a branch"},
		{spec: "HEAD:main", current: "x", src: "refs/heads/x", dst: "refs/heads/main"},
		{spec: "HEAD~2:topic", src: "HEAD~2", dst: "refs/heads/topic"},
		{spec: "feature^:topic", src: "feature^", dst: "refs/heads/topic"},
		{spec: "0123456789abcdef0123456789abcdef01234567:topic", src: "0123456789abcdef0123456789abcdef01234567", dst: "refs/heads/topic"},
		{spec: "0123456789abcdef0123456789abcdef01234567", wantErr: "destination is required"},
		{spec: "feature:heads/main", src: "refs/heads/feature", dst: "refs/heads/main"},
		{spec: "feature:refs/heads/main", src: "refs/heads/feature", dst: "refs/heads/main"},
		{spec: "refs/tags/v1", src: "refs/tags/v1", dst: "refs/tags/v1"},
		{spec: "refs/tags/v1:v2", src: "refs/tags/v1", dst: "refs/tags/v2"},
		{spec: "tags/v1", src: "refs/tags/v1", dst: "refs/tags/v1"},
		{spec: "refs/heads/*:refs/heads/*", src: "refs/heads/*", dst: "refs/heads/*"},
		{spec: "+feature", force: true, src: "refs/heads/feature", dst: "refs/heads/feature"},
		{spec: "+feature:main", force: true, src: "refs/heads/feature", dst: "refs/heads/main"},
		{spec: ":feature", del: true, dst: "refs/heads/feature"},
		{spec: ":", wantErr: "matching refspec"},
		{spec: "", wantErr: "empty"},
		{spec: "-f", wantErr: "starts with '-'"},
		{spec: "--force", wantErr: "starts with '-'"},
		{spec: "+-f", wantErr: "starts with '-'"},
		{spec: "feature:-x", wantErr: "destination starts with '-'"},
		{spec: "^refs/heads/x", wantErr: "negative"},
		{spec: "a:b:c", wantErr: "more than one ':'"},
		{spec: "feature:mäin", wantErr: "non-ASCII"},
		{spec: "tag v1", wantErr: "space"},
		{spec: "feature:ma..in", wantErr: "invalid destination"},
		{spec: "feature:main.lock", wantErr: "invalid destination"},
		{spec: "feature:.hidden", wantErr: "invalid destination"},
		{spec: "feature:a//b", wantErr: "invalid destination"},
		{spec: "feature:a@{1}", wantErr: "invalid destination"},
		{spec: "feature:HEAD", wantErr: "HEAD is not a valid destination"},
		{spec: "feature:refs/remotes/origin/main", wantErr: "only branches"},
		{spec: "feature:remotes/origin/main", wantErr: "remote-tracking"},
		{spec: "feature:refs/for/main", wantErr: "only branches"},
		{spec: "refs/heads/*:refs/heads/x", wantErr: "wildcard"},
		{spec: "a*b*:c*d*", wantErr: "wildcard"},
		{spec: "fea[ture", wantErr: "invalid source"},
		{spec: "feature~x:y", wantErr: "invalid revision"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			r, err := ParsePushRefspec(tt.spec, tt.current)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrRefspec) {
					t.Fatalf("got %+v, %v; want an ErrRefspec containing %q", r, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Force != tt.force || r.Delete != tt.del || r.Src != tt.src || r.Dst != tt.dst {
				t.Fatalf("got force=%v delete=%v %q → %q, want force=%v delete=%v %q → %q", r.Force, r.Delete, r.Src, r.Dst, tt.force, tt.del, tt.src, tt.dst)
			}
			if !contains(r.Candidates, r.Dst) {
				t.Fatalf("candidates %v lack the destination %q", r.Candidates, r.Dst)
			}
		})
	}
}

func TestProtectedBranchMatch(t *testing.T) {
	tests := []struct {
		protected string
		ref       string
		want      bool
	}{
		{protected: "main", ref: "refs/heads/main", want: true},
		{protected: "main", ref: "refs/heads/MAIN", want: true},
		{protected: "Main", ref: "refs/heads/main", want: true},
		{protected: "main", ref: "refs/heads/main2", want: false},
		{protected: "main", ref: "refs/tags/main", want: false},
		{protected: "main", ref: "refs/heads/*", want: true},
		{protected: "main", ref: "refs/heads/ma*", want: true},
		{protected: "main", ref: "refs/heads/*n", want: true},
		{protected: "main", ref: "refs/heads/m*x", want: false},
		{protected: "main", ref: "refs/heads/feature/*", want: false},
		{protected: "release/*", ref: "refs/heads/release/1.0", want: true},
		{protected: "release/*", ref: "refs/heads/Release/2", want: true},
		{protected: "release/*", ref: "refs/heads/releases", want: false},
		{protected: "release/*", ref: "refs/heads/rel*", want: true},
		{protected: "release/*", ref: "refs/heads/*", want: true},
		{protected: "release/*", ref: "refs/heads/feature/*", want: false},
		{protected: "refs/heads/prod", ref: "refs/heads/prod", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.protected+" "+tt.ref, func(t *testing.T) {
			p, err := parseProtectedBranch(tt.protected)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.matchesRef(tt.ref); got != tt.want {
				t.Fatalf("matchesRef = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsPRMerge(t *testing.T) {
	tests := []struct {
		tool string
		want bool
	}{
		{tool: "merge_pull_request", want: true},
		{tool: "pr_merge", want: true},
		{tool: "mergePullRequest", want: true},
		{tool: "pull-request-merge", want: true},
		{tool: "accept_merge_request", want: true},
		{tool: "merge_mr", want: true},
		{tool: "enable_pr_auto_merge", want: true},
		{tool: "PRMerge", want: true},
		{tool: "mergePR", want: true},
		{tool: "merge", want: false},
		{tool: "git_merge", want: false},
		{tool: "create_pull_request", want: false},
		{tool: "update_pull_request_branch", want: false},
		{tool: "list_merged_branches", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			if got := isPRMerge(tt.tool); got != tt.want {
				t.Fatalf("isPRMerge(%q) = %v, want %v", tt.tool, got, tt.want)
			}
		})
	}
}
