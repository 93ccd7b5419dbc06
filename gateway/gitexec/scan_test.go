package gitexec

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCheckConfig(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
		want    []string // keys reported
	}{
		{name: "plain repo", entries: []Entry{
			{Scope: "local", Key: "core.repositoryformatversion", Value: "0"},
			{Scope: "local", Key: "core.bare", Value: "false"},
			{Scope: "local", Key: "remote.origin.url", Value: "git@github.com:acme/app.git"},
			{Scope: "local", Key: "remote.origin.fetch", Value: "+refs/heads/*:refs/remotes/origin/*"},
			{Scope: "local", Key: "branch.main.remote", Value: "origin"},
			{Scope: "local", Key: "core.hookspath", Value: ".husky/_"},
			{Scope: "local", Key: "user.email", Value: "a@b.c"},
		}, want: nil},
		{name: "hardening itself is not reported", entries: []Entry{
			{Scope: "command", Key: "core.fsmonitor", Value: "false"},
			{Scope: "command", Key: "credential.helper", Value: "!gateway-helper"},
		}, want: nil},
		{name: "fsmonitor", entries: []Entry{{Scope: "local", Key: "core.fsmonitor", Value: "/tmp/x"}}, want: []string{"core.fsmonitor"}},
		{name: "fsmonitor true", entries: []Entry{{Scope: "local", Key: "core.fsmonitor", NoValue: true}}, want: []string{"core.fsmonitor"}},
		{name: "fsmonitor false", entries: []Entry{{Scope: "local", Key: "core.fsmonitor", Value: "false"}}, want: nil},
		{name: "sshCommand", entries: []Entry{{Scope: "local", Key: "core.sshcommand", Value: "sh -c x"}}, want: []string{"core.sshcommand"}},
		{name: "editor and pager", entries: []Entry{{Scope: "local", Key: "core.editor", Value: "x"}, {Scope: "local", Key: "core.pager", Value: "x"}, {Scope: "local", Key: "pager.log", Value: "x"}}, want: []string{"core.editor", "core.pager", "pager.log"}},
		{name: "filter", entries: []Entry{{Scope: "local", Key: "filter.lfs.clean", Value: "git-lfs clean"}, {Scope: "local", Key: "filter.lfs.required", Value: "true"}}, want: []string{"filter.lfs.clean", "filter.lfs.required"}},
		{name: "diff drivers", entries: []Entry{{Scope: "local", Key: "diff.x.textconv", Value: "x"}, {Scope: "local", Key: "diff.x.command", Value: "x"}, {Scope: "local", Key: "diff.external", Value: "x"}, {Scope: "local", Key: "diff.renames", Value: "true"}}, want: []string{"diff.external", "diff.x.command", "diff.x.textconv"}},
		{name: "merge driver", entries: []Entry{{Scope: "local", Key: "merge.ours.driver", Value: "true"}}, want: []string{"merge.ours.driver"}},
		{name: "credential helper", entries: []Entry{{Scope: "local", Key: "credential.helper", Value: "store"}, {Scope: "local", Key: "credential.https://x.helper", Value: "x"}}, want: []string{"credential.helper", "credential.https://x.helper"}},
		{name: "includes", entries: []Entry{{Scope: "local", Key: "include.path", Value: "/etc/x"}, {Scope: "local", Key: "includeif.gitdir:/x/.path", Value: "/etc/x"}}, want: []string{"include.path", "includeif.gitdir:/x/.path"}},
		{name: "pack programs", entries: []Entry{{Scope: "local", Key: "remote.origin.uploadpack", Value: "x"}, {Scope: "local", Key: "remote.origin.receivepack", Value: "x"}, {Scope: "local", Key: "uploadpack.packobjectshook", Value: "x"}, {Scope: "local", Key: "remote.origin.vcs", Value: "x"}}, want: []string{"remote.origin.receivepack", "remote.origin.uploadpack", "remote.origin.vcs", "uploadpack.packobjectshook"}},
		{name: "insteadOf to ssh and https is fine", entries: []Entry{{Scope: "local", Key: "url.git@github.com:.insteadof", Value: "https://github.com/"}, {Scope: "local", Key: "url.https://github.com/.pushinsteadof", Value: "gh:"}}, want: nil},
		{name: "insteadOf to ext", entries: []Entry{{Scope: "local", Key: "url.ext::sh -c x.insteadof", Value: "https://github.com/"}}, want: []string{"url.ext::sh -c x.insteadof"}},
		{name: "pushInsteadOf to a local path", entries: []Entry{{Scope: "local", Key: "url./tmp/evil.pushinsteadof", Value: "git@github.com:"}}, want: []string{"url./tmp/evil.pushinsteadof"}},
		{name: "insteadOf to file", entries: []Entry{{Scope: "local", Key: "url.file:///x.insteadof", Value: "https://"}}, want: []string{"url.file:///x.insteadof"}},
		{name: "protocol allow", entries: []Entry{{Scope: "local", Key: "protocol.ext.allow", Value: "always"}, {Scope: "local", Key: "protocol.allow", Value: "always"}, {Scope: "local", Key: "protocol.version", Value: "2"}}, want: []string{"protocol.allow", "protocol.ext.allow"}},
		{name: "shell alias", entries: []Entry{{Scope: "local", Key: "alias.st", Value: "status"}, {Scope: "local", Key: "alias.x", Value: " !sh"}}, want: []string{"alias.x"}},
		{name: "submodule update command", entries: []Entry{{Scope: "local", Key: "submodule.m.update", Value: "!sh"}, {Scope: "local", Key: "submodule.n.update", Value: "rebase"}}, want: []string{"submodule.m.update"}},
		{name: "gpg", entries: []Entry{{Scope: "local", Key: "gpg.program", Value: "x"}, {Scope: "local", Key: "gpg.ssh.program", Value: "x"}, {Scope: "local", Key: "gpg.ssh.defaultkeycommand", Value: "x"}}, want: []string{"gpg.program", "gpg.ssh.defaultkeycommand", "gpg.ssh.program"}},
		{name: "worktree scope counts", entries: []Entry{{Scope: "worktree", Key: "core.sshcommand", Value: "x"}}, want: []string{"core.sshcommand"}},
		{name: "mixed-case subsection is kept", entries: []Entry{{Scope: "local", Key: "filter.LFS.clean", Value: "x"}}, want: []string{"filter.LFS.clean"}},
		{name: "askpass and proxy", entries: []Entry{{Scope: "local", Key: "core.askpass", Value: "x"}, {Scope: "local", Key: "core.gitproxy", Value: "x"}, {Scope: "local", Key: "core.alternaterefscommand", Value: "x"}}, want: []string{"core.alternaterefscommand", "core.askpass", "core.gitproxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckConfig(tt.entries)
			var keys []string
			for _, f := range got {
				keys = append(keys, f.Key)
				if f.Reason == "" {
					t.Errorf("finding %s has no reason", f.Key)
				}
			}
			if strings.Join(keys, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("findings = %v, want %v", keys, tt.want)
			}
		})
	}
}

func TestScanConfigRealRepo(t *testing.T) {
	tests := []struct {
		name    string
		config  [][2]string
		want    []string
		wantErr error
	}{
		{name: "clean", config: [][2]string{{"remote.origin.url", "git@github.com:a/b.git"}}},
		{name: "fsmonitor", config: [][2]string{{"core.fsmonitor", "/x"}}, want: []string{"core.fsmonitor"}, wantErr: ErrExecutableConfig},
		{name: "include reported", config: [][2]string{{"include.path", "/dev/null"}}, want: []string{"include.path"}, wantErr: ErrExecutableConfig},
		{name: "filter with capital subsection", config: [][2]string{{"filter.Evil.smudge", "x"}}, want: []string{"filter.Evil.smudge"}, wantErr: ErrExecutableConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t)
			for _, kv := range tt.config {
				setupGit(t, r.WorkTree, "config", kv[0], kv[1])
			}
			findings, err := ScanConfig(context.Background(), r.Options())
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, f := range findings {
				keys = append(keys, f.Key)
			}
			if strings.Join(keys, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("findings = %v, want %v", keys, tt.want)
			}
			err = RefuseExecutableConfig(context.Background(), r.Options())
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("RefuseExecutableConfig = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestScanConfigBrokenConfigIsAnError(t *testing.T) {
	r := newRepo(t)
	if err := writeFile(r.CommonDir+"/config", "[core\n\tbare = false\n"); err != nil {
		t.Fatal(err)
	}
	if err := RefuseExecutableConfig(context.Background(), r.Options()); err == nil {
		t.Fatal("a config git cannot parse was accepted")
	}
}

func TestScanConfigUnreadableIncludeIsAnError(t *testing.T) {
	// Every git command reads includes while starting up, so an include of a
	// device cannot be skipped: it must make the scan fail (callers deny).
	r := newRepo(t)
	setupGit(t, r.WorkTree, "config", "include.path", "/dev/zero")
	if err := RefuseExecutableConfig(context.Background(), r.Options()); err == nil {
		t.Fatal("an include of /dev/zero was accepted")
	}
}

func TestParseConfigList(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Entry
		wantErr bool
	}{
		{name: "empty", in: ""},
		{name: "two", in: "local\x00core.bare\nfalse\x00local\x00core.x\x00", want: []Entry{{Scope: "local", Key: "core.bare", Value: "false"}, {Scope: "local", Key: "core.x", NoValue: true}}},
		{name: "value with newline", in: "local\x00a.b\nx\ny\x00", want: []Entry{{Scope: "local", Key: "a.b", Value: "x\ny"}}},
		{name: "truncated", in: "local\x00a.b\nx", wantErr: true},
		{name: "no scope terminator", in: "local", wantErr: true},
		{name: "empty key", in: "local\x00\x00", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfigList([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
			}
		})
	}
}

func FuzzParseConfigList(f *testing.F) {
	f.Add([]byte("local\x00core.bare\nfalse\x00local\x00core.x\x00"))
	f.Add([]byte("command\x00filter.X.clean\nsh\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		entries, err := ParseConfigList(in)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Key == "" || e.Scope == "" {
				t.Fatalf("empty key or scope accepted: %+v", e)
			}
		}
		// Classification must not panic and must be deterministic.
		a, b := CheckConfig(entries), CheckConfig(entries)
		if len(a) != len(b) {
			t.Fatal("CheckConfig is not deterministic")
		}
	})
}
