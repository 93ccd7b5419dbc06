package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// initRepo creates an empty repository (git init, HEAD on the unborn
// branch main) for the differential tests.
func initRepo(tb testing.TB) Repo {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Skip("git not installed")
	}
	root, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(root, "repo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("git", "init", "-q", "-b", "main", dir)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git init: %v\n%s", err, out)
	}
	r, err := FindRepo(dir, root)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// writeConfigs replaces the repository's config and config.worktree
// (removed when worktree is empty).
func writeConfigs(tb testing.TB, r Repo, local, worktree []byte) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(r.CommonDir, "config"), local, 0o644); err != nil {
		tb.Fatal(err)
	}
	wt := filepath.Join(r.GitDir, "config.worktree")
	if len(worktree) == 0 {
		if err := os.Remove(wt); err != nil && !os.IsNotExist(err) {
			tb.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(wt, worktree, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// probeNames are the remote names whose URLs the differential tests
// compare: every remote the entries name (a few at most), origin and one
// that is not configured.
func probeNames(entries []Entry, max int) []string {
	seen := map[string]bool{"origin": true, "nosuch": true}
	names := []string{"origin", "nosuch"}
	for _, e := range entries {
		first, last := strings.IndexByte(e.Key, '.'), strings.LastIndexByte(e.Key, '.')
		if last <= first || e.Key[:first] != "remote" {
			continue
		}
		n := e.Key[first+1 : last]
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\n") || len(n) > 100 || seen[n] {
			continue
		}
		seen[n] = true
		names = append(names, n)
		if len(names) >= max+2 {
			break
		}
	}
	sort.Strings(names)
	return names
}

// differential reads r's config natively and, when the native reader is
// sure, with git (`git config --list`, `git remote get-url --all [--push]`
// for probeNames) and fails on any difference. It reports whether the
// native reader was sure.
func differential(tb testing.TB, r Repo, maxNames int) bool {
	tb.Helper()
	ctx := context.Background()
	o := r.Options()
	native, err := NativeConfig(r, o)
	if err != nil {
		if !errors.Is(err, ErrUnsure) {
			tb.Fatalf("NativeConfig failed without ErrUnsure: %v", err)
		}
		return false
	}
	viaGit, err := ListConfig(ctx, o)
	if err != nil {
		tb.Fatalf("the native reader is sure but git config --list fails: %v", err)
	}
	if !sameEntries(native, viaGit) {
		tb.Fatalf("entries differ\nnative: %q\n   git: %q", entryStrings(native), entryStrings(viaGit))
	}
	for _, name := range probeNames(native, maxNames) {
		for _, push := range []bool{false, true} {
			urls, nerr := RemoteURLs(native, name, push)
			args := []string{"remote", "get-url", "--all"}
			if push {
				args = append(args, "--push")
			}
			res, gerr := Run(ctx, o, append(args, "--", name)...)
			var ge *Error
			switch {
			case errors.Is(nerr, ErrNoSuchRemote):
				if !errors.As(gerr, &ge) || ge.ExitCode != 2 {
					tb.Fatalf("remote %q push=%v: native says no such remote, git says %q (%v)", name, push, res.Stdout, gerr)
				}
			case nerr != nil:
				tb.Fatalf("remote %q push=%v: NativeConfig was sure but RemoteURLs fails: %v", name, push, nerr)
			case gerr != nil:
				tb.Fatalf("remote %q push=%v: native says %q, git fails: %v", name, push, urls, gerr)
			default:
				if want := strings.Join(urls, "\n") + "\n"; string(res.Stdout) != want {
					tb.Fatalf("remote %q push=%v:\nnative: %q\n   git: %q", name, push, want, res.Stdout)
				}
			}
		}
	}
	return true
}

func entryStrings(entries []Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Scope + " " + e.Key
		if !e.NoValue {
			out[i] += "=" + e.Value
		}
	}
	return out
}

// diffCases are the configurations both readers must agree on (sure) or
// that the native reader must leave to git (unsure).
var diffCases = []struct {
	name     string
	config   string // .git/config
	worktree string // .git/config.worktree ("" for none)
	setup    func(tb testing.TB, r Repo)
	sure     bool
}{
	// Syntax.
	{name: "git init's config", config: "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", sure: true},
	{name: "empty file", config: "", sure: true},
	{name: "no config file", setup: removeFile("config"), sure: true},
	{name: "comments everywhere", config: "# c\n; c\n[core] # c\n\tbare = false ; c\n[remote \"origin\"] ; c\n\turl = git@github.com:a/b.git # c\n", sure: true},
	{name: "section and key case", config: "[Remote \"origin\"]\n\tURL = git@github.com:a/b.git\n\tPushURL = git@github.com:a/c.git\n", sure: true},
	{name: "subsection case is kept", config: "[remote \"Origin\"]\n\turl = https://github.com/a/b\n[remote \"origin\"]\n\turl = https://github.com/a/c\n", sure: true},
	{name: "deprecated dotted section", config: "[remote.Origin]\n\turl = git@github.com:a/b.git\n[REMOTE.up]\nurl = https://github.com/x/y\n", sure: true},
	{name: "subsection escapes", config: "[remote \"a\\\"b\"]\n\turl = https://github.com/a/b\n[remote \"c\\\\d\"]\n\turl = https://github.com/c/d\n", sure: true},
	{name: "subsection with dots and spaces", config: "[remote \"a.b\"]\n\turl = https://github.com/a/b\n[remote   \"c d\"]\n\turl = https://github.com/c/d\n", sure: true},
	{name: "entries on header lines", config: "[core] bare = false\n[remote \"origin\"]url=https://github.com/a/b\n", sure: true},
	{name: "quoted and escaped values", config: "[remote \"origin\"]\n\turl = \"https://github.com/a/b\"\n\tpushurl = https://\"github.com\"/a/\\\"c\\\\\n[x]\n\ty = \"  a # ; b  \"\n\tz = \\t\\n\\b\n", sure: true},
	{name: "whitespace runs and trailing spaces", config: "[x]\n\ty =   a \t  b   \n\tz=\"\" c\n\tw =\n", sure: true},
	{name: "line continuations", config: "[remote \"origin\"]\n\turl = https://github.com/\\\n\ta/b\n[x]\n\ty = \"p\\\nq\" r \\\n s\n", sure: true},
	{name: "bare boolean keys", config: "[core]\n\tbare\n[remote \"origin\"]\n\turl = https://github.com/a/b\n\tmirror\n\tprune\n", sure: true},
	{name: "keys with digits and dashes", config: "[x]\n\ta-1 = 2\n\tB-c3\n", sure: true},
	{name: "byte order mark", config: "\xEF\xBB\xBF[remote \"origin\"]\n\turl = https://github.com/a/b\n", sure: true},
	{name: "CRLF line endings", config: "[remote \"origin\"]\r\n\turl = https://github.com/a/b\r\n\tpushurl = \"https://github.com/\\\r\nc/d\"\r\n", sure: true},
	{name: "no final newline", config: "[remote \"origin\"]\n\turl = https://github.com/a/b", sure: true},
	{name: "empty subsection", config: "[foo \"\"]\n\tk = v\n", sure: true},
	{name: "UTF-8", config: "[remote \"é\"]\n\turl = https://bücher.example/a/b\n[x]\n\ty = ü\n", sure: true},
	{name: "settings git reads elsewhere are only listed", config: "[core]\n\tfilemode = maybe\n\tabbrev = bogus\n\tcompression = 99\n[push]\n\tdefault = bogus\n[branch]\n\tautosetupmerge = bogus\n[remote \"origin\"]\n\turl = https://github.com/a/b\n\ttagopt = --bogus\n", sure: true},
	{name: "executable settings are listed (the caller refuses)", config: "[core]\n\tsshCommand = touch /tmp/x\n\tfsmonitor = /tmp/x\n[filter \"lfs\"]\n\tclean = x\n", sure: true},

	// insteadOf, pushInsteadOf, pushurl.
	{name: "insteadOf rewrites url", config: "[url \"git@github.com:\"]\n\tinsteadOf = gh:\n[remote \"origin\"]\n\turl = gh:a/b\n", sure: true},
	{name: "longest insteadOf wins", config: "[url \"https://a.example/\"]\n\tinsteadOf = x\n[url \"https://b.example/\"]\n\tinsteadOf = x:y/\n\tinsteadOf = x:\n[remote \"origin\"]\n\turl = x:y/z\n\turl = x:q\n\turl = xq\n", sure: true},
	{name: "equal length: first base wins", config: "[url \"https://a.example/\"]\n\tinsteadOf = p:\n[url \"https://b.example/\"]\n\tinsteadOf = p:\n[remote \"origin\"]\n\turl = p:z\n", sure: true},
	{name: "bases grouped by first appearance", config: "[url \"https://b.example/\"]\n\tinsteadOf = q\n[url \"https://a.example/\"]\n\tinsteadOf = p:\n[url \"https://b.example/\"]\n\tinsteadOf = p:\n[remote \"origin\"]\n\turl = p:z\n", sure: true},
	{name: "empty insteadOf matches everything", config: "[url \"https://a.example/\"]\n\tinsteadOf =\n[remote \"origin\"]\n\turl = z/y\n", sure: true},
	{name: "pushurl rewritten by insteadOf, not pushInsteadOf", config: "[url \"https://a.example/\"]\n\tinsteadOf = x:\n[url \"https://b.example/\"]\n\tpushInsteadOf = x:\n[remote \"origin\"]\n\turl = https://github.com/a/b\n\tpushurl = x:c\n", sure: true},
	{name: "pushInsteadOf applies to url when no pushurl", config: "[url \"https://a.example/\"]\n\tinsteadOf = x:\n[url \"https://b.example/\"]\n\tpushInsteadOf = x:\n[remote \"origin\"]\n\turl = x:c\n", sure: true},
	{name: "pushInsteadOf matching one url of two", config: "[url \"https://b.example/\"]\n\tpushInsteadOf = x:\n[remote \"origin\"]\n\turl = x:c\n\turl = https://github.com/a/b\n", sure: true},
	{name: "pushInsteadOf giving the same URL still counts", config: "[url \"x:\"]\n\tpushInsteadOf = x:\n[remote \"origin\"]\n\turl = https://github.com/a/b\n\turl = x:c\n", sure: true},
	{name: "several pushurls", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n\tpushurl = https://github.com/a/c\n\tpushurl = git@github.com:a/d.git\n", sure: true},
	{name: "remote without url is its own name", config: "[url \"https://a.example/\"]\n\tinsteadOf = ori\n[url \"https://b.example/\"]\n\tpushInsteadOf = orig\n[remote \"origin\"]\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", sure: true},
	{name: "remote with pushurl only", config: "[remote \"origin\"]\n\tpushurl = https://github.com/a/c\n", sure: true},
	{name: "empty url", config: "[remote \"origin\"]\n\turl =\n\turl = https://github.com/a/b\n", sure: true},
	{name: "subsectionless url and remote keys are ignored", config: "[url]\n\tinsteadOf = x\n[remote]\n\tpushDefault = origin\n\turl = y\n[remote \"origin\"]\n\turl = x:z\n", sure: true},
	{name: "remote named with a leading slash is ignored", config: "[remote \"/x\"]\n\turl = https://github.com/a/b\n", sure: true},
	{name: "refspecs", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\tpush = refs/heads/main:refs/heads/main\n\tpush = HEAD:refs/heads/x\n", sure: true},
	{name: "url with spaces inside quotes", config: "[remote \"origin\"]\n\turl = \"https://github.com/a b\"\n", sure: true},
	{name: "url with an escaped newline", config: "[remote \"origin\"]\n\turl = https://github.com/a\\nhttps://evil.example/b\n", sure: true},

	// Worktree config.
	{name: "worktree config enabled", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n[remote \"origin\"]\n\turl = https://github.com/a/b\n", worktree: "[remote \"origin\"]\n\tpushurl = https://github.com/a/c\n[url \"https://x.example/\"]\n\tinsteadOf = https://github.com/a/c\n", sure: true},
	{name: "worktree config enabled in version 0", config: "[core]\n\trepositoryformatversion = 0\n[extensions]\n\tworktreeConfig\n", worktree: "[remote \"origin\"]\n\turl = https://github.com/a/c\n", sure: true},
	{name: "worktree config without a format version is not read", config: "[extensions]\n\tworktreeConfig = true\n", worktree: "[remote \"origin\"]\n\turl = https://github.com/a/c\n", sure: true},
	{name: "worktree config disabled", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = false\n", worktree: "[remote \"origin\"]\n\turl = https://github.com/a/c\n", sure: true},
	{name: "worktree config enabled, no file", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = on\n", sure: true},

	// Repository layout.
	{name: "packed current branch", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n", setup: commitAndPack, sure: true},
	{name: "loose current branch", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n", setup: commit, sure: true},
	{name: "detached HEAD", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n", setup: detach, sure: true},
	{name: "malformed packed-refs", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n", setup: putFile("packed-refs", "garbage\n")},
	{name: "HEAD on a tag", setup: putFile("HEAD", "ref: refs/tags/v1\n")},
	{name: "HEAD malformed", setup: putFile("HEAD", "nonsense\n")},
	{name: "objects missing", setup: removeFile("objects")},
	{name: "current branch a symbolic ref", setup: putFile("refs/heads/main", "ref: refs/heads/other\n")},
	{name: "config is a directory", setup: func(tb testing.TB, r Repo) {
		removeFile("config")(tb, r)
		if err := os.Mkdir(filepath.Join(r.CommonDir, "config"), 0o755); err != nil {
			tb.Fatal(err)
		}
	}},
	{name: "config is a symlink", setup: func(tb testing.TB, r Repo) {
		removeFile("config")(tb, r)
		if err := os.Symlink("/etc/hostname", filepath.Join(r.CommonDir, "config")); err != nil {
			tb.Fatal(err)
		}
	}},

	// What the native reader leaves to git.
	{name: "unknown escape", config: "[x]\n\ty = \\q\n"},
	{name: "NUL byte", config: "[x]\n\ty = a\x00b\n"},
	{name: "include", config: "[include]\n\tpath = /etc/passwd\n"},
	{name: "includeIf", config: "[includeIf \"gitdir:/\"]\n\tpath = /etc/passwd\n"},
	{name: "syntax error", config: "[x\n"},
	{name: "format version 2", config: "[core]\n\trepositoryformatversion = 2\n"},
	{name: "object format extension", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n"},
	{name: "ref storage extension", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\trefStorage = reftable\n"},
	{name: "worktreeConfig not a plain boolean", config: "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = 2\n"},
	{name: "core.bare not a boolean", config: "[core]\n\tbare = maybe\n"},
	{name: "core.worktree without value", config: "[core]\n\tworktree\n"},
	{name: "url without value", config: "[remote \"origin\"]\n\turl\n"},
	{name: "insteadOf without value", config: "[url \"https://a.example/\"]\n\tinsteadOf\n"},
	{name: "branch.remote without value", config: "[branch \"main\"]\n\tremote\n"},
	{name: "empty branch name", config: "[branch \"\"]\n\tremote = origin\n"},
	{name: "empty remote name", config: "[remote \"\"]\n\turl = https://github.com/a/b\n"},
	{name: "mirror not a boolean", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n\tmirror = maybe\n"},
	{name: "invalid fetch refspec", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n\tfetch = refs/heads/*\n"},
	{name: "credentialsInUrl", config: "[transfer]\n\tcredentialsInUrl = die\n[remote \"origin\"]\n\turl = https://u:p@github.com/a/b\n"},
	{name: "tagopt without value", config: "[remote \"origin\"]\n\turl = https://github.com/a/b\n\ttagopt\n"},
}

func removeFile(name string) func(testing.TB, Repo) {
	return func(tb testing.TB, r Repo) {
		tb.Helper()
		if err := os.RemoveAll(filepath.Join(r.CommonDir, name)); err != nil {
			tb.Fatal(err)
		}
	}
}

func putFile(name, content string) func(testing.TB, Repo) {
	return func(tb testing.TB, r Repo) {
		tb.Helper()
		p := filepath.Join(r.CommonDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func commit(tb testing.TB, r Repo) {
	tb.Helper()
	setupGit(tb, r.WorkTree, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "x")
}

func commitAndPack(tb testing.TB, r Repo) {
	tb.Helper()
	commit(tb, r)
	setupGit(tb, r.WorkTree, "tag", "-a", "-m", "t", "v1")
	setupGit(tb, r.WorkTree, "pack-refs", "--all")
	if _, err := os.Stat(filepath.Join(r.CommonDir, "refs", "heads", "main")); err == nil {
		tb.Fatal("pack-refs left the loose ref")
	}
}

func detach(tb testing.TB, r Repo) {
	tb.Helper()
	commit(tb, r)
	setupGit(tb, r.WorkTree, "checkout", "-q", "--detach")
}

func TestNativeConfigDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git several times per case")
	}
	for _, tt := range diffCases {
		t.Run(tt.name, func(t *testing.T) {
			r := initRepo(t)
			if tt.setup != nil {
				tt.setup(t, r)
			}
			if tt.config != "" || tt.setup == nil {
				writeConfigs(t, r, []byte(tt.config), []byte(tt.worktree))
			}
			if got := differential(t, r, 4); got != tt.sure {
				_, err := NativeConfig(r, r.Options())
				t.Fatalf("native reader sure = %v, want %v (%v)", got, tt.sure, err)
			}
		})
	}
}
