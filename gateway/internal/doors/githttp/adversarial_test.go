package githttp

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/gitwire"
)

const zero = zeroID

// rawPush sends a hand-crafted receive-pack request with the agent token and
// returns the status and body.
func (e *env) rawPush(t testing.TB, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.door.URL+"/git/github.com/acme/app.git/git-receive-pack", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("agent", agentToken)
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// commands encodes a command list: the first line carries caps.
func commands(caps string, lines ...string) []byte {
	var b []byte
	for i, l := range lines {
		if i == 0 {
			l += "\x00" + caps
		}
		b = gitwire.AppendString(b, l+"\n")
	}
	return gitwire.AppendFlush(b)
}

// packOf builds a pack of the objects reachable from revs and not from
// the exclusions (git pack-objects --revs).
func packOf(t testing.TB, dir string, revs ...string) []byte {
	t.Helper()
	cmd := exec.Command("git", "pack-objects", "--stdout", "--revs", "-q")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(strings.Join(revs, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pack-objects: %v", err)
	}
	return out
}

// decodeReport reads a side-band-64k response into its bands.
func decodeReport(t testing.TB, body string) (data, progress, errs string) {
	t.Helper()
	r := gitwire.NewReader(strings.NewReader(body))
	for {
		kind, p, err := r.Next()
		if err != nil {
			t.Fatalf("reading the response %q: %v", body, err)
		}
		if kind == gitwire.Flush {
			return
		}
		switch p[0] {
		case 1:
			data += string(p[1:])
		case 2:
			progress += string(p[1:])
		case 3:
			errs += string(p[1:])
		}
	}
}

// TestForgedOldIDIsClassifiedFromTheObjects: a client that claims the
// upstream's tip is the parent of its rewritten commit (so the update looks
// like a fast-forward) is refused as a force push: the door compares with
// the upstream's real tip.
func TestForgedOldIDIsClassifiedFromTheObjects(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "feature")
	real := e.upstreamRef(t, "refs/heads/feature")
	e.mustGit(t, work, "commit", "-q", "--amend", "-m", "rewritten")
	rewritten := strings.TrimSpace(e.mustGit(t, work, "rev-parse", "HEAD"))
	parent := strings.TrimSpace(e.mustGit(t, work, "rev-parse", "HEAD^"))

	for _, tc := range []struct{ name, claimed string }{
		{name: "claims the parent", claimed: parent},
		{name: "claims the new id", claimed: rewritten},
		{name: "claims a create", claimed: zero},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := commands("report-status side-band-64k", tc.claimed+" "+rewritten+" refs/heads/feature")
			body = append(body, packOf(t, work, rewritten, "^"+parent)...)
			status, resp := e.rawPush(t, body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, resp)
			}
			data, _, _ := decodeReport(t, resp)
			if !strings.Contains(data, "ng refs/heads/feature") || !strings.Contains(data, "force push") {
				t.Fatalf("report %q", data)
			}
			if got := e.upstreamRef(t, "refs/heads/feature"); got != real {
				t.Fatalf("upstream feature moved to %s", got)
			}
			if d := e.sink.last(t); d.Decision != "deny" || !strings.Contains(string(d.Args), `"force"`) {
				t.Fatalf("record %+v %s", d, d.Args)
			}
		})
	}
}

// TestMalformedRequests: malformed and truncated pkt-lines, invalid ref
// names and junk instead of a pack are refused, recorded, and push nothing.
func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	head := e.commit(t, work, "f.txt", "one\n")
	main := e.upstreamRef(t, "refs/heads/main")
	pack := packOf(t, work, head, "^"+main)
	good := commands("report-status side-band-64k", zero+" "+head+" refs/heads/feature")
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{name: "bad length header", body: []byte("00zz" + zero), want: "invalid pkt-line header"},
		{name: "truncated pkt-line", body: good[:30], want: "truncated"},
		{name: "no flush", body: good[:len(good)-4], want: "without a flush-pkt"},
		{name: "length 0003", body: []byte("0003"), want: "0003"},
		{name: "oversized length", body: []byte("ffff" + strings.Repeat("a", 100)), want: "exceeds 65520"},
		{name: "unknown capability", body: commands("report-status side-band-64k evil-cap", zero+" "+head+" refs/heads/feature"), want: "not supported"},
		{name: "push options", body: commands("report-status side-band-64k push-options", zero+" "+head+" refs/heads/feature"), want: "push options"},
		{name: "two commands for one ref", body: commands("report-status side-band-64k", zero+" "+head+" refs/heads/feature", zero+" "+head+" refs/heads/feature"), want: "twice"},
		{name: "control character in the ref", body: commands("report-status side-band-64k", zero+" "+head+" refs/heads/a\x1bb"), want: "printable"},
		{name: "upper-case id", body: commands("report-status side-band-64k", zero+" "+strings.ToUpper(head)+" refs/heads/feature"), want: "malformed object id"},
		{name: "shallow", body: append(gitwire.AppendString(nil, "shallow "+head+"\n"), good...), want: "shallow"},
		{name: "junk instead of the pack", body: append(append([]byte(nil), good...), []byte("NOTAPACK0000")...), want: "not a pack"},
		{name: "truncated pack", body: append(append([]byte(nil), good...), pack[:len(pack)/2]...), want: "pack"},
		{name: "no pack", body: good, want: "missing or truncated"},
		{name: "data after a delete-only list", body: append(commands("report-status side-band-64k", main+" "+zero+" refs/heads/main"), 'x'), want: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.sink.Decisions())
			status, resp := e.rawPush(t, tc.body)
			text := resp
			if status == http.StatusOK && strings.HasPrefix(resp, "0") {
				data, progress, errs := decodeReport(t, resp)
				text = data + progress + errs
			}
			if !strings.Contains(text, tc.want) {
				t.Fatalf("status %d, response %q lacks %q", status, text, tc.want)
			}
			if strings.Contains(text, "ok refs/") {
				t.Fatalf("a ref was reported pushed: %q", text)
			}
			ds := e.sink.Decisions()
			if len(ds) != before+1 || ds[len(ds)-1].Decision != "deny" {
				t.Fatalf("want one deny record, got %d", len(ds)-before)
			}
			if e.upstreamRef(t, "refs/heads/feature") != "" || e.upstreamRef(t, "refs/heads/main") != main {
				t.Fatal("the upstream changed")
			}
		})
	}
}

// TestPackFailingFsck: a commit with a malformed author line is refused by
// fsck in the quarantine; git shows the unpack error; nothing is pushed.
func TestPackFailingFsck(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	main := e.upstreamRef(t, "refs/heads/main")
	tree := strings.TrimSpace(e.mustGit(t, work, "rev-parse", "HEAD^{tree}"))
	bad := "tree " + tree + "\nparent " + main + "\nauthor Bad <bad@example.invalid 1700000000 +0000\ncommitter C <c@example.invalid> 1700000000 +0000\n\nbad\n"
	cmd := exec.Command("git", "hash-object", "--literally", "-t", "commit", "-w", "--stdin")
	cmd.Dir = work
	cmd.Stdin = strings.NewReader(bad)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	e.mustGit(t, work, "update-ref", "refs/heads/badbranch", id)
	res, err := e.git(work, "push", "origin", "badbranch")
	if err == nil {
		t.Fatalf("pushed a commit failing fsck:\n%s", res)
	}
	if !strings.Contains(res, "remote unpack failed") || !strings.Contains(res, "fsck") {
		t.Fatalf("git output lacks the fsck refusal:\n%s", res)
	}
	if e.upstreamRef(t, "refs/heads/badbranch") != "" {
		t.Fatal("the upstream has the bad commit's branch")
	}
	if d := e.sink.last(t); d.Decision != "deny" || !strings.Contains(d.Reason, "fsck") {
		t.Fatalf("record %+v", d)
	}
	// The quarantine is gone: the mirror does not hold the object.
	ents, _ := filepath.Glob(filepath.Join(e.mirrorDir(t), "objects", "incoming-*"))
	if len(ents) != 0 {
		t.Fatalf("quarantines left behind: %v", ents)
	}
}

// TestLimits: object count, pack size and ref count limits refuse with a
// git-readable error and push nothing.
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		setup func(t *testing.T, e *env, work string) []string // push args
		want  string
	}{
		{
			name: "objects", cfg: Config{MaxObjects: 2},
			setup: func(t *testing.T, e *env, work string) []string {
				e.mustGit(t, work, "switch", "-q", "-c", "feature")
				e.commit(t, work, "a.txt", "a\n")
				e.commit(t, work, "b.txt", "b\n")
				return []string{"push", "origin", "feature"}
			},
			want: "more than the 2 allowed",
		},
		{
			name: "pack bytes", cfg: Config{MaxPackBytes: 4096},
			setup: func(t *testing.T, e *env, work string) []string {
				e.mustGit(t, work, "switch", "-q", "-c", "feature")
				writeFile(t, filepath.Join(work, "big.bin"), randomText(64<<10))
				e.mustGit(t, work, "add", "big.bin")
				e.mustGit(t, work, "commit", "-q", "-m", "big")
				return []string{"push", "origin", "feature"}
			},
			want: "exceeds",
		},
		{
			name: "refs", cfg: Config{MaxRefs: 1},
			setup: func(t *testing.T, e *env, work string) []string {
				e.mustGit(t, work, "switch", "-q", "-c", "one")
				e.commit(t, work, "a.txt", "a\n")
				e.mustGit(t, work, "switch", "-q", "-c", "two")
				return []string{"push", "origin", "one", "two"}
			},
			want: "more than 1 ref updates",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{cfg: tc.cfg})
			work := e.clone(t)
			args := tc.setup(t, e, work)
			out, err := e.git(work, args...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("git push: %v, output lacks %q:\n%s", err, tc.want, out)
			}
			for _, ref := range []string{"refs/heads/feature", "refs/heads/one", "refs/heads/two"} {
				if e.upstreamRef(t, ref) != "" {
					t.Fatalf("%s reached the upstream", ref)
				}
			}
			if d := e.sink.last(t); d.Decision != "deny" {
				t.Fatalf("record %+v", d)
			}
		})
	}
}

// TestAuthAndAllowlist: no token or a wrong one is a 401 (git asks its
// credential helper); a host outside servers.git.allowed_domains is refused
// with the reason git prints, and recorded.
func TestAuthAndAllowlist(t *testing.T) {
	e := newEnv(t, envOptions{})
	base := strings.TrimPrefix(e.door.URL, "http://")
	for _, tc := range []struct{ name, url, want string }{
		{name: "no token", url: "http://" + base + "/git/github.com/acme/app.git", want: "could not read Username"},
		{name: "wrong token", url: "http://agent:wrong@" + base + "/git/github.com/acme/app.git", want: "Authentication failed"},
		{name: "host not allowlisted", url: "http://agent:" + agentToken + "@" + base + "/git/evil.example/acme/app.git", want: "not in the gateway's git allowlist"},
		{name: "invalid host", url: "http://agent:" + agentToken + "@" + base + "/git/Evil..example/acme/app.git", want: "invalid host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.git("", "clone", "-q", tc.url, filepath.Join(t.TempDir(), "c"))
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("clone: %v, output lacks %q:\n%s", err, tc.want, out)
			}
		})
	}
	if d := e.sink.last(t); d.Decision != "deny" || d.Rule != RuleHostNotServed || !strings.Contains(d.Reason, "evil.example") || d.Tool != "fetch" {
		t.Fatalf("record %+v", d)
	}
	// Bearer works as well as Basic.
	req, _ := http.NewRequest(http.MethodGet, e.door.URL+"/git/github.com/acme/app.git/info/refs?service=git-upload-pack", nil)
	req.Header.Set("Authorization", "Bearer "+agentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-git-upload-pack-advertisement" {
		t.Fatalf("Bearer: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// randomText is n bytes that do not compress.
func randomText(n int) string {
	var b strings.Builder
	x := uint64(88172645463325252)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b.WriteByte(byte('!' + x%90))
	}
	return b.String()
}

// TestUpstreamMovedAfterTheAdvertisement: within Config.Fresh the push is
// classified against the refs the client was shown; if the upstream moved
// in between, the never-forced upstream push is rejected by the upstream
// and nothing is overwritten.
func TestUpstreamMovedAfterTheAdvertisement(t *testing.T) {
	e := newEnv(t, envOptions{cfg: Config{Fresh: time.Hour}})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "feature")
	base := e.upstreamRef(t, "refs/heads/feature")
	// The client is shown the refs (the mirror is refreshed now) ...
	req, _ := http.NewRequest(http.MethodGet, e.door.URL+"/git/github.com/acme/app.git/info/refs?service=git-receive-pack", nil)
	req.SetBasicAuth("agent", agentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// ... then someone else moves the upstream's feature.
	other := t.TempDir()
	run(t, "", "clone", "-q", "-b", "feature", e.bareD, other)
	writeFile(t, filepath.Join(other, "o.txt"), "other\n")
	run(t, other, "add", "o.txt")
	run(t, other, "commit", "-q", "-m", "other")
	run(t, other, "push", "-q", "origin", "feature")
	moved := e.upstreamRef(t, "refs/heads/feature")
	// The client's commit fast-forwards what it was shown, not the upstream.
	next := e.commit(t, work, "g.txt", "two\n")
	body := commands("report-status side-band-64k", base+" "+next+" refs/heads/feature")
	body = append(body, packOf(t, work, next, "^"+base)...)
	status, out := e.rawPush(t, body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, out)
	}
	data, _, _ := decodeReport(t, out)
	if !strings.Contains(data, "ng refs/heads/feature upstream rejected") {
		t.Fatalf("report %q", data)
	}
	if got := e.upstreamRef(t, "refs/heads/feature"); got != moved {
		t.Fatalf("the upstream's feature was overwritten: %s, want %s", got, moved)
	}
}

// TestAgentWrittenRepositoryRunsNothing: what the agent's repository holds
// (its config, hooks, attributes, .gitmodules) runs nothing in the gateway:
// a .gitmodules with an "update = !command" is refused by fsck in the
// quarantine, and a filter named by .gitattributes and defined in the
// agent's config never runs on the gateway's side.
func TestAgentWrittenRepositoryRunsNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	marker := filepath.Join(t.TempDir(), "MARKER")
	// Hooks and config in the agent's repository.
	writeFile(t, filepath.Join(work, ".git", "hooks", "pre-push"), "#!/bin/sh\n:\n")
	e.mustGit(t, work, "config", "filter.evil.clean", "touch "+marker+"-clean; cat")
	e.mustGit(t, work, "config", "filter.evil.smudge", "touch "+marker+"-smudge; cat")
	e.mustGit(t, work, "config", "core.fsmonitor", "touch "+marker+"-fsmonitor; false")
	e.mustGit(t, work, "switch", "-q", "-c", "attrs")
	writeFile(t, filepath.Join(work, ".gitattributes"), "* filter=evil\n")
	e.mustGit(t, work, "add", ".gitattributes")
	e.mustGit(t, work, "commit", "-q", "-m", "attributes")
	_ = os.Remove(marker + "-clean") // the client's own add ran its filter; that is the client's business
	_ = os.Remove(marker + "-fsmonitor")
	e.mustGit(t, work, "push", "-q", "origin", "attrs")
	if e.upstreamRef(t, "refs/heads/attrs") == "" {
		t.Fatal("the push did not land")
	}

	e.mustGit(t, work, "switch", "-q", "-c", "submodule", "origin/main")
	writeFile(t, filepath.Join(work, ".gitmodules"), "[submodule \"x\"]\n\tpath = x\n\turl = https://github.com/acme/x\n\tupdate = !touch "+marker+"-update\n")
	e.mustGit(t, work, "add", ".gitmodules")
	e.mustGit(t, work, "commit", "-q", "-m", "submodule")
	out, err := e.git(work, "push", "origin", "submodule")
	if err == nil || !strings.Contains(out, "fsck") {
		t.Fatalf("a .gitmodules with update=!command was accepted: %v\n%s", err, out)
	}
	if e.upstreamRef(t, "refs/heads/submodule") != "" {
		t.Fatal("the upstream has the submodule branch")
	}
	// A fresh clone through the door checks out nothing that runs in the gateway.
	e.clone(t)
	for _, suffix := range []string{"-update", "-smudge"} {
		if _, err := os.Stat(marker + suffix); err == nil {
			t.Fatalf("%s ran", suffix)
		}
	}
}
