package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"ironcurtain.dev/gateway/gitref"
	"ironcurtain.dev/gateway/netpolicy"
)

// fuzzTree is a sandbox with symlinks in every direction, shared by the
// path fuzzers.
func fuzzTree(f *testing.F) (tree, *Engine) {
	tr := newTree(f)
	tr.apply(f, []op{
		{Write: "$SANDBOX/a.txt"}, {Write: "$SANDBOX/dir/b.txt"}, {Write: "$OUTSIDE/secret.txt"},
		{Symlink: []string{"$SANDBOX/out", "$OUTSIDE"}},
		{Symlink: []string{"$SANDBOX/out-file", "$OUTSIDE/secret.txt"}},
		{Symlink: []string{"$SANDBOX/dangling", "$OUTSIDE/nothing"}},
		{Symlink: []string{"$SANDBOX/rel", "../outside"}},
		{Symlink: []string{"$SANDBOX/in", "dir"}},
		{Symlink: []string{"$SANDBOX/loop", "loop"}},
		{Symlink: []string{"$SANDBOX/up", ".."}},
		{Symlink: []string{"$OUTSIDE/back", "$SANDBOX/dir"}},
	})
	return tr, tr.engine(f, suite{})
}

// deepestExisting returns the longest prefix of p that exists (lstat).
func deepestExisting(p string) string {
	for {
		if _, err := os.Lstat(p); err == nil || p == "/" {
			return p
		}
		p = filepath.Dir(p)
	}
}

func addPathSeeds(f *testing.F) {
	for _, s := range []string{"a.txt", "$SANDBOX/a.txt", "$SANDBOX/out/secret.txt", "$SANDBOX/../outside/secret.txt",
		"dir/../../outside", "$SANDBOX2/x", "~/Downloads/x", "~", "$SANDBOX/dangling", "$SANDBOX/rel/secret.txt",
		"$SANDBOX/in/b.txt", "$SANDBOX/loop", "$SANDBOX/up/outside/secret.txt", "$OUTSIDE/back/b.txt",
		"$SANDBOX/nope/../out-file", "$SANDBOX/a.txt/../out-file", "$SANDBOX/a.txt\x00/../../x", "//$SANDBOX//./dir/./b.txt",
		"$SANDBOX/.git/hooks/x", "", ".", ".."} {
		f.Add(s)
	}
}

// FuzzCanonicalPath: canonicalisation never panics; its result is absolute,
// clean, free of symlinks in every existing component, and for a path that
// exists it equals what the OS resolves.
func FuzzCanonicalPath(f *testing.F) {
	tr, e := fuzzTree(f)
	addPathSeeds(f)
	f.Fuzz(func(t *testing.T, raw string) {
		raw = tr.expand(raw)
		p, err := e.canon.canonical(raw)
		if err != nil {
			return
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			t.Fatalf("canonical(%q) = %q: not absolute and clean", raw, p)
		}
		if strings.ContainsRune(p, 0) {
			t.Fatalf("canonical(%q) = %q contains NUL", raw, p)
		}
		a := deepestExisting(p)
		if real, err := filepath.EvalSymlinks(a); err == nil && real != a {
			t.Fatalf("canonical(%q) = %q, but its existing part %q resolves to %q", raw, p, a, real)
		}
		abs := raw
		if strings.HasPrefix(abs, "~") {
			return
		}
		if !filepath.IsAbs(abs) {
			// Not filepath.Join: it would clean "out/.." away lexically,
			// while the OS (and canonical) resolve ".." after the symlink.
			abs = tr.sandbox + "/" + abs
		}
		if _, err := os.Stat(abs); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil && real != p {
				t.Fatalf("canonical(%q) = %q, the OS resolves it to %q", raw, p, real)
			}
		}
	})
}

// FuzzSandboxAllow: whenever a filesystem call is allowed by sandbox
// containment, every path the server will receive is inside the sandbox
// after realpath. It runs with the default sandbox-safe roles (a delete is
// then never allowed by containment) and with the original's (deletes in
// the sandbox are).
func FuzzSandboxAllow(f *testing.F) {
	tr, e := fuzzTree(f)
	orig := tr.engine(f, suite{Settings: settings{SandboxSafeRoles: ptr(OriginalSandboxSafeRoles())}})
	addPathSeeds(f)
	f.Fuzz(func(t *testing.T, raw string) {
		raw = tr.expand(raw)
		for _, tool := range []string{"read_text_file", "write_file", "delete_file", "orig:read_text_file", "orig:write_file", "orig:delete_file"} {
			eng := e
			if name, ok := strings.CutPrefix(tool, "orig:"); ok {
				eng, tool = orig, name
			}
			ev := eng.Evaluate(context.Background(), Request{Server: "filesystem", Tool: tool, Args: map[string]any{"path": raw}})
			if eng == e && tool == "delete_file" && ev.Decision.Rule == RuleSandboxAllow {
				t.Fatalf("delete_file(%q) resolved by sandbox containment with the default sandbox-safe roles", raw)
			}
			if ev.Decision.Status != Allow {
				continue
			}
			p, _ := ev.Transport["path"].(string)
			a := deepestExisting(p)
			real, err := filepath.EvalSymlinks(a)
			if err != nil {
				t.Fatalf("%s(%q) allowed but %q cannot be resolved: %v", tool, raw, a, err)
			}
			inSandbox := within(real, tr.sandbox) && within(p, tr.sandbox)
			inDownloads := within(real, filepath.Join(tr.home, "Downloads")) && within(p, filepath.Join(tr.home, "Downloads"))
			if !inSandbox && !inDownloads {
				t.Fatalf("%s(%q) allowed (%s) with transport path %q (realpath %q) outside the sandbox", tool, raw, ev.Decision.Rule, p, real)
			}
			if tool != "read_text_file" && isProtectedRepoFile(p) {
				t.Fatalf("%s(%q) allowed on protected file %q", tool, raw, p)
			}
		}
	})
}

// helperRE is git's "<transport>::<address>" syntax.
var helperRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*::`)

// FuzzParseGitRemoteURL: never panics; an accepted remote is https or ssh,
// has a host, parses back from URL() to the same remote, and for the
// scp-style form its host is exactly what ssh would connect to.
func FuzzParseGitRemoteURL(f *testing.F) {
	for _, s := range []string{"git@github.com:acme/app.git", "[git@evil:2222]:x", "git@[evil:2222]:x", "ssh://git@github.com:22/a",
		"https://github.com/a/b", "git@github.com@evil:x", "ext::sh -c id", "fd::3", "file:///x", "/tmp/x", "host:path",
		"https://①②⑦.⓪.⓪.①/x", "ssh://[::1]:22/x", "git@xn--bcher-kva.example:a/b", "a::b", "https://a:b@c/d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := ParseGitRemoteURL(raw)
		if err != nil {
			return
		}
		if r.Scheme != "https" && r.Scheme != "ssh" {
			t.Fatalf("%q: scheme %q", raw, r.Scheme)
		}
		if r.Host.IsZero() {
			t.Fatalf("%q: no host", raw)
		}
		if r.Scheme == "https" && r.User != "" {
			t.Fatalf("%q: https remote with a user", raw)
		}
		if strings.ContainsAny(raw, " \t\r\n\\") || helperRE.MatchString(raw) {
			t.Fatalf("%q accepted despite whitespace, a backslash or a helper transport", raw)
		}
		again, err := ParseGitRemoteURL(r.URL())
		if err != nil || again.Host != r.Host || again.Port != r.Port || again.User != r.User || again.RepoPath() != r.RepoPath() {
			t.Fatalf("%q: URL() %q parses to %+v, %v; want %+v", raw, r.URL(), again, err, r)
		}
		if r.SCP && !strings.HasPrefix(raw, "[") && !strings.Contains(raw, "@[") {
			hostPart := raw[:strings.IndexByte(raw, ':')]
			if at := strings.LastIndexByte(hostPart, '@'); at >= 0 {
				hostPart = hostPart[at+1:]
			}
			h, err := netpolicy.ParseHost(hostPart)
			if err != nil || h != r.Host {
				t.Fatalf("%q: ssh would connect to %q, parsed host %s", raw, hostPart, r.Host)
			}
		}
	})
}

// FuzzParsePushRefspec: never panics; an accepted refspec updates only
// refs/heads/ or refs/tags/, is ASCII, and any destination that is main in
// some spelling is caught by the protected-branch check.
func FuzzParsePushRefspec(f *testing.F) {
	for _, s := range []string{"main", "HEAD:main", "feature:heads/main", "+x", ":x", ":", "refs/heads/*:refs/heads/*",
		"feature:MAIN", "-f", "a:b:c", "HEAD~1:x", "refs/tags/v1:main", "x:refs/heads/ma*", "feature:mäin"} {
		f.Add(s, "work")
	}
	mainBranch, _ := parseProtectedBranch("main")
	f.Fuzz(func(t *testing.T, spec, current string) {
		if !gitref.ValidName(current, true, false) {
			current = ""
		}
		r, err := ParsePushRefspec(spec, current)
		if err != nil {
			return
		}
		if !utf8.ValidString(r.Dst) || strings.IndexFunc(r.Dst, func(c rune) bool { return c > 0x7e || c <= 0x20 }) >= 0 {
			t.Fatalf("%q: destination %q is not printable ASCII", spec, r.Dst)
		}
		if !strings.HasPrefix(r.Dst, "refs/heads/") && !strings.HasPrefix(r.Dst, "refs/tags/") {
			t.Fatalf("%q: destination %q", spec, r.Dst)
		}
		if strings.HasPrefix(strings.TrimPrefix(spec, "+"), "-") {
			t.Fatalf("%q: option accepted as a refspec", spec)
		}
		if r.Force != strings.HasPrefix(spec, "+") {
			t.Fatalf("%q: force = %v", spec, r.Force)
		}
		// Every spelling git reads as the branch main must be caught.
		dst := strings.TrimPrefix(spec, "+")
		if i := strings.LastIndexByte(dst, ':'); i >= 0 {
			dst = dst[i+1:]
		} else if strings.EqualFold(dst, "HEAD") || dst == "@" {
			dst = current
		}
		switch strings.ToLower(dst) {
		case "main", "heads/main", "refs/heads/main":
			caught := false
			for _, c := range r.Candidates {
				caught = caught || mainBranch.matchesRef(c)
			}
			if !caught {
				t.Fatalf("%q (current %q): a push to main is not caught (candidates %v)", spec, current, r.Candidates)
			}
		}
	})
}

// FuzzDomainMatch: an allowlist pattern matches a host only when the host
// really is the pattern's name, a dot-boundary subdomain of a "*." pattern,
// or any non-IP name for "*".
func FuzzDomainMatch(f *testing.F) {
	for _, s := range [][2]string{{"*.github.com", "github.com"}, {"*.github.com", "evilgithub.com"}, {"*", "127.0.0.1"},
		{"*", "①②⑦.⓪.⓪.①"}, {"github.com", "GITHUB.COM."}, {"github.com/acme/app", "github.com"}, {"192.0.2.1", "192.0.2.01"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, host string) {
		p, err := parseDomainPattern(pattern)
		if err != nil {
			return
		}
		h, err := netpolicy.ParseHost(host)
		if err != nil {
			return
		}
		if !p.match(domainValue{host: h}) {
			return
		}
		// Both in URL form: a Pattern prints an IPv6 literal in brackets.
		ps := p.host.String()
		hs := h.URLHost()
		switch {
		case p.path != "":
			t.Fatalf("pattern %q with a repository path matched a bare host %q", pattern, host)
		case ps == "*":
			if h.IsIP() {
				t.Fatalf("* matched IP %q", host)
			}
		case strings.HasPrefix(ps, "*."):
			if h.IsIP() || (hs != ps[2:] && !strings.HasSuffix(hs, ps[1:])) {
				t.Fatalf("%q matched %q", pattern, host)
			}
		default:
			if hs != ps {
				t.Fatalf("%q matched %q (%s)", pattern, host, hs)
			}
		}
	})
}

// FuzzEvaluateJSON: the engine never panics on any JSON arguments for any
// tool (the recover belt is bypassed here), every decision is well formed,
// and an allowed fetch names a host that the allowing rule lists.
func FuzzEvaluateJSON(f *testing.F) {
	tr, e := fuzzTree(f)
	seeds := []struct{ tool, args string }{
		{"filesystem__read_text_file", `{"path":"a.txt"}`},
		{"filesystem__read_multiple_files", `{"paths":["a.txt",1,null]}`},
		{"filesystem__edit_file", `{"path":"a.txt","dryRun":true,"edits":[]}`},
		{"filesystem__move_file", `{"source":"$SANDBOX/out/secret.txt","destination":"x"}`},
		{"fetch__http_fetch", `{"url":"https://pkg.go.dev/"}`},
		{"fetch__fetch_many", `{"urls":["https://github.com/","http://127.1/"]}`},
		{"git__push", `{"path":"$SANDBOX","remote":"git@github.com:acme/app","branch":"HEAD:main","force":false}`},
		{"git__remote", `{"path":"$SANDBOX","operation":"add","url":"ext::sh"}`},
		{"github__get_issue", `{"owner":"ACME","repo":["app"],"number":1.5}`},
		{"mail__share_doc", `{"email":["a@acme.example"],"role":{"x":1}}`},
		{"proxy__add_domain", `{"domain":"*.github.com"}`},
		{"misc__report", `{"path":"~/Downloads","url":"https://x/"}`},
		{"nope__nope", `null`},
	}
	for _, s := range seeds {
		f.Add(s.tool, s.args)
	}
	devSites := []string{"github.com", "*.github.com", "pkg.go.dev", "bücher.example", "stackoverflow.com", "docs.python.org", "192.0.2.10"}
	var devPatterns []domainPattern
	for _, s := range devSites {
		p, _ := parseDomainPattern(s)
		devPatterns = append(devPatterns, p)
	}
	f.Fuzz(func(t *testing.T, tool, argsJSON string) {
		server, name, _ := strings.Cut(tool, "__")
		var args map[string]any
		if err := json.Unmarshal([]byte(tr.expand(argsJSON)), &args); err != nil {
			return
		}
		ev := e.evaluate(context.Background(), Request{Server: server, Tool: name, Args: args})
		d := ev.Decision
		if d.Status > Allow || d.Rule == "" || d.Reason == "" {
			t.Fatalf("malformed decision %+v", d)
		}
		if d.Status == Allow && server == "fetch" && (name == "http_fetch" || name == "fetch_many") {
			urls := []any{ev.Transport["url"]}
			if name == "fetch_many" {
				urls, _ = ev.Transport["urls"].([]any)
			}
			for _, u := range urls {
				s, _ := u.(string)
				parsed, err := netpolicy.ParseURL(s)
				if err != nil || !matchDomain(devPatterns, domainValue{host: parsed.Host}) {
					t.Fatalf("allowed fetch of %q (%s) that no allow list names", s, d.Rule)
				}
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }
