package githttp

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/auth"
	"ironcurtain.dev/gateway/internal/gitwire"
)

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		name, path, url, service, err string
	}{
		{name: "with .git", path: "/git/github.com/acme/app.git/info/refs", url: "https://github.com/acme/app.git", service: "info/refs"},
		{name: "without .git", path: "/git/github.com/acme/app/git-receive-pack", url: "https://github.com/acme/app.git", service: "git-receive-pack"},
		{name: "port", path: "/git/git.example:8443/a/b.git/git-upload-pack", url: "https://git.example:8443/a/b.git", service: "git-upload-pack"},
		{name: "upper-case host", path: "/git/GitHub.com/acme/app.git/info/refs", err: "invalid host"},
		{name: "dot-dot owner", path: "/git/github.com/../app.git/info/refs", err: "invalid owner"},
		{name: "dot repo", path: "/git/github.com/acme/.git/info/refs", err: "invalid owner"},
		{name: "dash owner", path: "/git/github.com/-acme/app.git/info/refs", err: "invalid owner"},
		{name: "percent", path: "/git/github.com/ac%2fme/app.git/info/refs", err: "invalid owner"},
		{name: "userinfo host", path: "/git/user@github.com/acme/app.git/info/refs", err: "invalid host"},
		{name: "port zero-led", path: "/git/github.com:0443/acme/app.git/info/refs", err: "invalid host"},
		{name: "nested group", path: "/git/gitlab.com/a/b/c.git/info/refs", err: "unknown git service"},
		{name: "dumb http file", path: "/git/github.com/acme/app.git/HEAD", err: "unknown git service"},
		{name: "short path", path: "/git/github.com/acme/info/refs", err: "unknown git service"},
		{name: "too short", path: "/git/github.com/acme", err: "the path must be"},
		{name: "trailing dot", path: "/git/github.com/acme/app./info/refs", err: "invalid owner"},
		{name: "objects", path: "/git/github.com/acme/app.git/objects/info/packs", err: "unknown git service"},
		{name: "no prefix", path: "/gitx/github.com/acme/app.git/info/refs", err: "not a git path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp, svc, err := parsePath(tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || rp.url != tc.url || svc != tc.service {
				t.Fatalf("got %q %q %v", rp.url, svc, err)
			}
		})
	}
}

func TestToken(t *testing.T) {
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct{ name, header, want string }{
		{name: "basic", header: basic("agent:tok"), want: "tok"},
		{name: "basic, any user", header: basic("x-access-token:tok"), want: "tok"},
		{name: "basic, colon in password", header: basic("u:a:b"), want: "a:b"},
		{name: "basic without colon", header: basic("tok"), want: ""},
		{name: "bearer", header: "Bearer tok", want: "tok"},
		{name: "bearer case", header: "bearer tok", want: "tok"},
		{name: "bad base64", header: "Basic !!!", want: ""},
		{name: "other scheme", header: "Token tok", want: ""},
		{name: "empty", header: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := token(http.Header{"Authorization": {tc.header}}); got != tc.want {
				t.Fatalf("token(%q) = %q, want %q", tc.header, got, tc.want)
			}
		})
	}
}

func TestParsePorcelain(t *testing.T) {
	cmds := []gitwire.Command{{Ref: "refs/heads/a"}, {Ref: "refs/heads/b"}, {Ref: "refs/heads/c"}}
	report := "To https://example/r.git\n*\t1111:refs/heads/a\t[new branch]\n!\t2222:refs/heads/b\t[remote rejected] (hook declined)\nDone\n"
	got := parsePorcelain(report, cmds)
	want := []gitwire.RefStatus{{Ref: "refs/heads/a"}, {Ref: "refs/heads/b", Error: "upstream rejected: [remote rejected] (hook declined)"}, {Ref: "refs/heads/c", Error: "the upstream push failed"}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ref %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCheckPackHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  string
		err  string
	}{
		{name: "v2", hdr: "PACK\x00\x00\x00\x02\x00\x00\x00\x05"},
		{name: "v3", hdr: "PACK\x00\x00\x00\x03\x00\x00\x00\x05"},
		{name: "v4", hdr: "PACK\x00\x00\x00\x04\x00\x00\x00\x05", err: "version 4"},
		{name: "too many objects", hdr: "PACK\x00\x00\x00\x02\x00\x00\x00\x0b", err: "11 objects"},
		{name: "huge count", hdr: "PACK\x00\x00\x00\x02\xff\xff\xff\xff", err: "4294967295 objects"},
		{name: "not a pack", hdr: "KCAP\x00\x00\x00\x02\x00\x00\x00\x01", err: "not a pack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkPackHeader([]byte(tc.hdr), 10)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
}

// FuzzParsePath: whatever the path, an accepted one yields an https URL of
// three clean segments that round-trips, and a known service.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/git/github.com/acme/app.git/info/refs", "/git/a:1/b/c/git-receive-pack", "/git/../a/b/info/refs", "/git/x/y/z.git.git/git-upload-pack"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rp, svc, err := parsePath(p)
		if err != nil {
			return
		}
		if svc != "info/refs" && svc != "git-upload-pack" && svc != "git-receive-pack" {
			t.Fatalf("service %q", svc)
		}
		rest, ok := strings.CutPrefix(rp.url, "https://")
		if !ok || strings.Count(rest, "/") != 2 || strings.Contains(rest, "..") || strings.ContainsAny(rest, "@?#%\\ \x00") {
			t.Fatalf("url %q from %q", rp.url, p)
		}
		again, _, err := parsePath("/git/" + rest + "/" + svc)
		if err != nil || again.url != rp.url {
			t.Fatalf("round trip of %q: %q %v", rp.url, again.url, err)
		}
	})
}

// FuzzToken: token never panics and a Basic header's token is its password
// (for a header value that is a valid token68: base64 with CR or LF in it is
// refused by auth.Parse).
func FuzzToken(f *testing.F) {
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("a:b")))
	f.Add("Bearer x")
	f.Fuzz(func(t *testing.T, h string) {
		_, _ = token(http.Header{"Authorization": {h}})
		if _, err := auth.Parse("Basic " + h); err != nil {
			return
		}
		if b, err := base64.StdEncoding.DecodeString(h); err == nil {
			if _, pass, ok := strings.Cut(string(b), ":"); ok {
				if got, _ := token(http.Header{"Authorization": {"Basic " + h}}); got != strings.TrimSpace(pass) && got != pass {
					t.Fatalf("token of %q = %q, want %q", string(b), got, pass)
				}
			}
		}
	})
}

// FuzzParsePorcelain: one status per command, whatever the report says.
func FuzzParsePorcelain(f *testing.F) {
	f.Add("!\tx:refs/heads/a\t[rejected]\n")
	f.Fuzz(func(t *testing.T, report string) {
		cmds := []gitwire.Command{{Ref: "refs/heads/a"}, {Ref: "refs/heads/b"}}
		got := parsePorcelain(report, cmds)
		if len(got) != 2 || got[0].Ref != "refs/heads/a" || got[1].Ref != "refs/heads/b" {
			t.Fatalf("%+v", got)
		}
	})
}
