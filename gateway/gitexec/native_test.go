package gitexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestReadRegularFile(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "f"), "hello\n")
	mustWrite(t, filepath.Join(dir, "empty"), "")
	mustSymlink(t, "f", filepath.Join(dir, "link"))
	mustSymlink(t, "nowhere", filepath.Join(dir, "dangling"))
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644) == nil
	tests := []struct {
		name    string
		path    string
		max     int64
		want    string
		found   bool
		wantErr string
	}{
		{name: "regular", path: "f", max: 100, want: "hello\n", found: true},
		{name: "exactly max", path: "f", max: 6, want: "hello\n", found: true},
		{name: "empty", path: "empty", max: 100, want: "", found: true},
		{name: "missing", path: "nope", max: 100},
		{name: "below a file", path: "f/x", max: 100},
		{name: "too large", path: "f", max: 5, wantErr: "larger than"},
		{name: "symbolic link", path: "link", max: 100, wantErr: "symbolic link"},
		{name: "dangling symbolic link", path: "dangling", max: 100, wantErr: "symbolic link"},
		{name: "directory", path: "d", max: 100, wantErr: "not a regular file"},
		{name: "FIFO (never blocks)", path: "fifo", max: 100, wantErr: "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.path == "fifo" && !fifo {
				t.Skip("cannot make a FIFO here")
			}
			got, found, err := ReadRegularFile(filepath.Join(dir, tt.path), tt.max)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), dir) {
					t.Fatalf("error names the host path: %v", err)
				}
				return
			}
			if err != nil || found != tt.found || string(got) != tt.want {
				t.Fatalf("got %q, %v, %v; want %q, %v", got, found, err, tt.want, tt.found)
			}
		})
	}
}

// TestNativeConfigLinkedWorktree: in a linked worktree the config is the
// common directory's, config.worktree is the worktree's own git
// directory's; both readers agree.
func TestNativeConfigLinkedWorktree(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git")
	}
	base, r := newCheckedRepo(t)
	wt := filepath.Join(base, "wt")
	gitSetup(t, r.WorkTree, "worktree", "add", "-q", "-b", "side", wt)
	lr, err := FindRepo(wt, base)
	if err != nil || lr.GitDir == lr.CommonDir {
		t.Fatalf("linked worktree: %+v, %v", lr, err)
	}
	mustWrite(t, filepath.Join(r.CommonDir, "config"), "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n[remote \"origin\"]\n\turl = https://github.com/a/b\n")
	mustWrite(t, filepath.Join(lr.GitDir, "config.worktree"), "[remote \"origin\"]\n\tpushurl = https://github.com/a/linked\n")
	mustWrite(t, filepath.Join(r.GitDir, "config.worktree"), "[remote \"origin\"]\n\tpushurl = https://github.com/a/main\n")
	for _, repo := range []Repo{lr, r} {
		if !differential(t, repo, 2) {
			_, err := NativeConfig(repo, repo.Options())
			t.Fatalf("native reader unsure in %s: %v", repo.GitDir, err)
		}
	}
	entries, err := NativeConfig(lr, lr.Options())
	if err != nil {
		t.Fatal(err)
	}
	if urls, err := RemoteURLs(entries, "origin", true); err != nil || !slices.Equal(urls, []string{"https://github.com/a/linked"}) {
		t.Fatalf("linked worktree push URLs %v, %v", urls, err)
	}
}

// TestNativeConfigCommandEntries: extra -c settings of Options.Config are
// listed as git lists them.
func TestNativeConfigCommandEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git")
	}
	r := initRepo(t)
	o := r.Options()
	o.Config = []string{"credential.helper=!gateway-helper get", "http.https://X.example/.extraHeader=a=b", "Core.AskPass="}
	native, err := NativeConfig(r, o)
	if err != nil {
		t.Fatal(err)
	}
	viaGit, err := ListConfig(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !sameEntries(native, viaGit) {
		t.Fatalf("entries differ\nnative: %q\n   git: %q", entryStrings(native), entryStrings(viaGit))
	}
	o.Config = []string{"bad key=x"}
	if _, err := NativeConfig(r, o); !errors.Is(err, ErrUnsure) {
		t.Fatalf("odd command-line key: err = %v, want ErrUnsure", err)
	}
}

func TestRemoteURLs(t *testing.T) {
	local := func(k, v string) Entry { return Entry{Scope: "local", Key: k, Value: v} }
	tests := []struct {
		name    string
		entries []Entry
		remote  string
		push    bool
		want    []string
		wantErr error
	}{
		{name: "url", entries: []Entry{local("remote.origin.url", "u1"), local("remote.origin.url", "u2")}, remote: "origin", want: []string{"u1", "u2"}},
		{name: "push falls back to url", entries: []Entry{local("remote.origin.url", "u1")}, remote: "origin", push: true, want: []string{"u1"}},
		{name: "pushurl for push only", entries: []Entry{local("remote.origin.url", "u1"), local("remote.origin.pushurl", "p1")}, remote: "origin", want: []string{"u1"}},
		{name: "pushurl", entries: []Entry{local("remote.origin.url", "u1"), local("remote.origin.pushurl", "p1")}, remote: "origin", push: true, want: []string{"p1"}},
		{name: "subsection is case-sensitive", entries: []Entry{local("remote.Origin.url", "u1")}, remote: "origin", wantErr: ErrNoSuchRemote},
		{name: "command scope does not define a remote", entries: []Entry{{Scope: "command", Key: "remote.origin.url", Value: "u1"}}, remote: "origin", wantErr: ErrNoSuchRemote},
		{name: "worktree scope does", entries: []Entry{{Scope: "worktree", Key: "remote.origin.url", Value: "u1"}}, remote: "origin", want: []string{"u1"}},
		{name: "any key defines it", entries: []Entry{local("remote.origin.tagopt", "--no-tags")}, remote: "origin", want: []string{"origin"}},
		{name: "vcs without url", entries: []Entry{local("remote.origin.vcs", "x")}, remote: "origin"},
		{name: "unsure about a url without value", entries: []Entry{{Scope: "local", Key: "remote.origin.url", NoValue: true}}, remote: "origin", wantErr: ErrUnsure},
		{name: "unsure about credentialsInUrl", entries: []Entry{local("remote.origin.url", "u"), local("transfer.credentialsinurl", "warn")}, remote: "origin", wantErr: ErrUnsure},
		{name: "names with a slash are paths", entries: []Entry{local("remote.a/b.url", "u")}, remote: "a/b", wantErr: ErrBadOption},
		{name: "empty name", remote: "", wantErr: ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RemoteURLs(tt.entries, tt.remote, tt.push)
			if tt.wantErr != nil || tt.want == nil {
				if err == nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v (urls %q), want %v", err, got, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("urls = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
