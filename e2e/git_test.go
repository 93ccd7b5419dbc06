package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// markerPrefix names the files planted hooks and executable git settings
// would create if anything ever ran them.
const markerPrefix = "ic-e2e-marker-"

// gitCloneTranscript clones the remote served by the internet container
// (a network operation: escalated, approved by the test).
const gitCloneTranscript = `name: e2e-git-clone
steps:
  - say: I clone the project.
    code: |
      return git.clone({ url: "https://` + stack.HostGit + `/` + stack.GitRepo + `.git", path: "/workspace/project" });
  - expect: { status: ok, contains: ["Cloned"] }
    final: Cloned.
`

// gitWorkTranscript commits on a feature branch, tries to reach git's code
// paths through the filesystem tool, pushes the branch (escalated,
// approved), tries force pushes and pushes to main (denied), and uses the
// repository a compromised container planted (refused).
const gitWorkTranscript = `name: e2e-git-work
steps:
  - say: I commit a change on a feature branch.
    code: |
      const repo = "/workspace/project";
      git.checkout({ path: repo, target: "feature/e2e", create_branch: true });
      filesystem.write_file({ path: repo + "/feature.txt", content: "feature from the e2e agent\n" });
      git.add({ path: repo, files: [repo + "/feature.txt"] });
      git.commit({ path: repo, message: "Add the e2e feature" });
      return git.log({ path: repo, max_count: 3, oneline: true });
  - expect: { status: ok, contains: ["Add the e2e feature", "initial commit"] }
    say: I try to install a hook and git settings through the filesystem tool.
    code: |
      const out = [];
      for (const path of ["/workspace/project/.git/hooks/pre-push", "/workspace/project/.git/config", "/workspace/project/.gitattributes"]) {
        try {
          filesystem.write_file({ path, content: "#!/bin/sh\necho pwned > /tmp/` + markerPrefix + `via-tool\n" });
          out.push("UNEXPECTED: wrote " + path);
        } catch (e: any) {
          out.push("refused " + path + ": " + e.message);
        }
      }
      return out.join("\n");
  - expect: { status: ok, contains: ["refused /workspace/project/.git/config"], not_contains: ["UNEXPECTED"] }
    say: I push the feature branch (a human approves network operations).
    code: |
      return git.push({ path: "/workspace/project", remote: "origin", branch: "feature/e2e" });
  - expect: { status: ok }
    say: Force pushes and pushes to main must be refused.
    code: |
      const repo = "/workspace/project";
      const attempts = [
        { path: repo, remote: "origin", branch: "feature/e2e", force: true },
        { path: repo, remote: "origin", branch: "feature/e2e", force_with_lease: true },
        { path: repo, remote: "origin", branch: "+feature/e2e:feature/e2e" },
        { path: repo, remote: "origin", branch: "feature/e2e", remote_branch: "main" },
        { path: repo, remote: "origin", branch: "feature/e2e:refs/heads/main" },
        { path: repo, remote: "origin", branch: "HEAD:main" },
      ];
      const out = [];
      for (const a of attempts) {
        try {
          git.push(a);
          out.push("UNEXPECTED: pushed " + JSON.stringify(a));
        } catch (e: any) {
          out.push("refused: " + e.message);
        }
      }
      return out.join("\n");
  - expect: { status: ok, contains: ["refused: "], not_contains: ["UNEXPECTED"] }
    say: I use the other repository in the workspace.
    code: |
      const repo = "/workspace/evil";
      const out = [];
      const tries: [string, () => any][] = [
        ["status", () => git.status({ path: repo })],
        ["add", () => git.add({ path: repo, all: true })],
        ["commit", () => git.commit({ path: repo, message: "evil", allow_empty: true })],
      ];
      for (const [name, f] of tries) {
        try {
          f();
          out.push("UNEXPECTED: " + name + " ran");
        } catch (e: any) {
          out.push("refused " + name + ": " + e.message);
        }
      }
      return out.join("\n");
  - expect: { status: ok, contains: ["refused status"], not_contains: ["UNEXPECTED"] }
    final: Committed and pushed the feature branch; force pushes, pushes to main and the planted repository were refused.
`

// hooks are planted in the cloned repository by the "compromised agent
// container" (directly on the shared volume, not through the gateway).
var hooks = []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-push",
	"post-checkout", "reference-transaction", "post-index-change", "pre-auto-gc", "post-merge", "push-to-checkout"}

func hookScript(name string) []byte {
	return []byte(fmt.Sprintf("#!/bin/sh\necho \"hook %s ran as $(id -u)\" > /tmp/%s%s\necho ran > /workspace/%s%s\nexit 0\n",
		name, markerPrefix, name, markerPrefix, name))
}

// TestGit: clone, commit, push a feature branch to the bare remote in the
// internet container (escalated, approved, verified on the remote); force
// pushes and pushes to main are denied; hooks and executable git settings
// planted in the workspace never run in the gateway.
func TestGit(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 8*time.Minute)
	const session = "git"

	mainBefore, err := s.RemoteGit(ctx, "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}

	if r, _ := runApproving(t, ctx, s, session, "git-clone", gitCloneTranscript, "cli:git__clone"); r.Code != 0 {
		t.Fatalf("clone run failed: %s", r)
	}

	plantHostileGit(t, ctx, s, session)

	r, approved := runApproving(t, ctx, s, session, "git-work", gitWorkTranscript, "git__push")
	if r.Code != 0 {
		t.Fatalf("git run failed: %s", r)
	}
	t.Logf("agent run:\n%s", lastLines(r.Stderr, 80))

	t.Run("pushed to the remote", func(t *testing.T) {
		subject, err := s.RemoteGit(ctx, "log", "-1", "--format=%s", "refs/heads/feature/e2e")
		if err != nil {
			t.Fatal(err)
		}
		if subject != "Add the e2e feature" {
			t.Errorf("remote feature/e2e head %q, want the agent's commit", subject)
		}
		content, err := s.RemoteGit(ctx, "show", "refs/heads/feature/e2e:feature.txt")
		if err != nil || content != "feature from the e2e agent" {
			t.Errorf("remote feature.txt = %q (%v)", content, err)
		}
		mainAfter, err := s.RemoteGit(ctx, "rev-parse", "refs/heads/main")
		if err != nil || mainAfter != mainBefore {
			t.Errorf("remote main moved from %s to %s (%v)", mainBefore, mainAfter, err)
		}
		refs, err := s.RemoteGit(ctx, "for-each-ref", "--format=%(refname)")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(refs); strings.Join(got, " ") != "refs/heads/feature/e2e refs/heads/main" {
			t.Errorf("remote refs = %v, want feature/e2e and main only", got)
		}
	})

	t.Run("the push used the gateway's token", func(t *testing.T) {
		reqs, err := s.InternetRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pushes := 0
		for _, q := range reqs {
			if q.Host != stack.HostGit {
				continue
			}
			if strings.Contains(q.Note, "wrong token") {
				t.Errorf("git presented a wrong token: %+v", q)
			}
			if strings.Contains(q.Note, "token ok git-receive-pack") {
				pushes++
			}
		}
		if pushes == 0 {
			t.Errorf("the remote saw no authenticated push (receive-pack)")
		}
	})

	t.Run("no planted code ran", func(t *testing.T) {
		checkNoMarkers(t, ctx, s)
	})

	// The check above means something only if the planted hooks do run
	// when something executes them: run one by hand in the gateway
	// container, see its marker, and remove it again.
	t.Run("control: a planted hook runs when executed", func(t *testing.T) {
		r, err := s.ExecGateway(ctx, "/workspace/project/.git/hooks/pre-commit")
		if err != nil || r.Code != 0 {
			t.Fatalf("running the hook by hand: %v %s", err, r)
		}
		if _, err := s.GatewayFile(ctx, "/tmp/"+markerPrefix+"pre-commit"); err != nil {
			t.Fatalf("the hook ran but its marker is not visible: %v", err)
		}
		if r, err := s.ExecGateway(ctx, "rm", "-f", "/tmp/"+markerPrefix+"pre-commit", "/workspace/"+markerPrefix+"pre-commit"); err != nil || r.Code != 0 {
			t.Fatalf("removing the control markers: %v %s", err, r)
		}
	})

	t.Run("tool_calls", func(t *testing.T) {
		calls := toolCalls(t, ctx, s, session)
		var escalated, deniedPushes, deniedWrites, evilOK int
		for _, c := range calls {
			t.Logf("tool_calls %s", c)
			switch {
			case c.Decision == "escalate":
				escalated++
				if c.Outcome != "ok" || (c.Tool != "clone" && c.Tool != "push") {
					t.Errorf("escalated call %s, want clone or push that ran", c)
				}
			case c.Tool == "push" && c.Decision == "deny":
				deniedPushes++
				if c.Outcome != "denied" {
					t.Errorf("denied push with outcome %q", c.Outcome)
				}
			case c.Tool == "write_file" && c.Decision == "deny":
				deniedWrites++
			}
			if strings.Contains(c.Args, "/workspace/evil") && c.Outcome == "ok" {
				evilOK++
			}
		}
		if escalated != 2 || len(approved) != 1 {
			t.Errorf("%d escalated calls, want 2 (clone, push)", escalated)
		}
		if deniedPushes != 6 {
			t.Errorf("%d denied pushes, want 6", deniedPushes)
		}
		if deniedWrites != 3 {
			t.Errorf("%d denied writes to git's code paths, want 3", deniedWrites)
		}
		if evilOK != 0 {
			t.Errorf("%d calls on the planted repository succeeded", evilOK)
		}
		verifyChain(t, ctx, s, session, int64(2*len(calls)))
	})
}

// plantHostileGit writes, from inside the agent container and around the
// gateway, what a compromised agent could: hooks in the cloned repository,
// and a repository whose config and attributes name programs.
func plantHostileGit(t *testing.T, ctx context.Context, s *stack.Stack, session string) {
	t.Helper()
	plant := func(path, mode string, content []byte) {
		t.Helper()
		if err := s.Probe(ctx, session, content, nil, "plant", "-mode", mode, path); err != nil {
			t.Fatalf("planting %s: %v", path, err)
		}
	}
	for _, h := range hooks {
		plant("/workspace/project/.git/hooks/"+h, "0755", hookScript(h))
	}
	if err := s.Probe(ctx, session, nil, nil, "mkdir", "/workspace/evil/.git/objects", "/workspace/evil/.git/refs/heads"); err != nil {
		t.Fatal(err)
	}
	plant("/workspace/evil/.git/HEAD", "0644", []byte("ref: refs/heads/main\n"))
	plant("/workspace/evil/.git/config", "0644", []byte(`[core]
	repositoryformatversion = 0
	filemode = true
	bare = false
	fsmonitor = /workspace/evil/.git/fsmonitor.sh
	sshCommand = sh -c 'echo ran > /tmp/`+markerPrefix+`sshcommand'
	pager = sh -c 'echo ran > /tmp/`+markerPrefix+`pager'
	hooksPath = /workspace/evil/.git/hooks
[filter "evil"]
	clean = sh -c 'echo ran > /tmp/`+markerPrefix+`filter-clean; cat'
	smudge = sh -c 'echo ran > /tmp/`+markerPrefix+`filter-smudge; cat'
[diff "evil"]
	textconv = sh -c 'echo ran > /tmp/`+markerPrefix+`textconv; cat'
`))
	plant("/workspace/evil/.git/fsmonitor.sh", "0755", hookScript("fsmonitor"))
	for _, h := range hooks {
		plant("/workspace/evil/.git/hooks/"+h, "0755", hookScript("evil-"+h))
	}
	plant("/workspace/evil/.gitattributes", "0644", []byte("* filter=evil diff=evil\n"))
	plant("/workspace/evil/file.txt", "0644", []byte("planted\n"))
}

// checkNoMarkers fails if any marker file exists in the gateway's /tmp,
// its home, its state directory or the workspace.
func checkNoMarkers(t *testing.T, ctx context.Context, s *stack.Stack) {
	t.Helper()
	for _, dir := range []string{"/tmp", "/workspace", "/var/lib/ironcurtain", "/home"} {
		paths, err := s.GatewayPaths(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			base := p[strings.LastIndex(strings.TrimSuffix(p, "/"), "/")+1:]
			if strings.HasPrefix(base, markerPrefix) {
				content, _ := s.GatewayFile(ctx, "/"+strings.TrimPrefix(p, "/"))
				t.Errorf("planted code ran in the gateway: %s exists (%q)", p, content)
			}
		}
		t.Logf("%s: %d entries, no marker", dir, len(paths))
	}
}
