package gitscan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/testenv"
	"ironcurtain.dev/gateway/secretscan"
)

// Sample secrets are assembled at run time so that the repository holds none in one piece.
var (
	awsKeyID = "AKIA" + "IOSFODNN7EXAMPLE"
	ghToken  = "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "123456"
	privKey  = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + strings.Repeat("b3BlbnNzaC1rZXktdjEAAAAA", 4) + "\n-----END OPENSSH PRIVATE KEY-----\n"
)

// testRepo is a throw-away repository driven with the real git CLI.
type testRepo struct {
	t   *testing.T
	dir string
}

func newTestRepo(t testing.TB) *testRepo {
	t.Helper()
	testenv.Require(t, "git")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &testRepo{dir: filepath.Join(root, "repo")}
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.git(t, "init", "--quiet", "-b", "main")
	return r
}

func (r *testRepo) git(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgSign=false"}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+r.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *testRepo) write(t testing.TB, name string, data []byte) {
	t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// commit writes files (nil content removes the file) and commits them with msg.
func (r *testRepo) commit(t testing.TB, msg string, files map[string][]byte) string {
	t.Helper()
	for name, data := range files {
		if data == nil {
			r.git(t, "rm", "--quiet", "--", name)
			continue
		}
		r.write(t, name, data)
		r.git(t, "add", "--", name)
	}
	r.git(t, "commit", "--quiet", "--allow-empty", "-m", msg)
	return r.git(t, "rev-parse", "HEAD")
}

func (r *testRepo) opts() gitexec.Options {
	return gitexec.Options{GitDir: filepath.Join(r.dir, ".git"), Dir: r.dir}
}

func kinds(rep Report) []string {
	var out []string
	for _, h := range rep.Hits() {
		out = append(out, string(h.Kind)+" @ "+h.Where)
	}
	return out
}

func TestScanFindsWhatThePushAdds(t *testing.T) {
	d := secretscan.MustDefault()
	binary := append([]byte("\x00\x01\x02PNG\x00\xff"), []byte("junk "+awsKeyID+" junk\x00\x00")...)
	tests := []struct {
		name  string
		build func(t *testing.T, r *testRepo) (base, tip string)
		want  []string // substrings, one per expected hit, in order
	}{
		{
			name: "key in an added file",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				return base, r.commit(t, "add config", map[string][]byte{"config/prod.env": []byte("AWS_ACCESS_KEY_ID=" + awsKeyID + "\n")})
			},
			want: []string{"aws-access-key-id @ file config/prod.env (blob "},
		},
		{
			name: "key only in a commit message",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				return base, r.commit(t, "debug: token was "+ghToken, map[string][]byte{"README": []byte("hello again\n")})
			},
			want: []string{"github-token @ commit "},
		},
		{
			name: "key deep in the pushed range, removed again at the tip",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				r.commit(t, "one", map[string][]byte{"a.txt": []byte("a\n")})
				r.commit(t, "two", map[string][]byte{"deploy/id_ed25519": []byte(privKey)})
				r.commit(t, "three", map[string][]byte{"deploy/id_ed25519": nil})
				return base, r.commit(t, "four", map[string][]byte{"b.txt": []byte("b\n")})
			},
			want: []string{"private-key @ file deploy/id_ed25519 (blob "},
		},
		{
			name: "key in a binary blob",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				return base, r.commit(t, "logo", map[string][]byte{"logo.png": binary})
			},
			want: []string{"aws-access-key-id @ file logo.png (blob "},
		},
		{
			name: "key already upstream is not reported again",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "old leak", map[string][]byte{"old.env": []byte(awsKeyID + "\n")})
				return base, r.commit(t, "clean", map[string][]byte{"README": []byte("fine\n")})
			},
			want: nil,
		},
		{
			name: "clean push",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				return base, r.commit(t, "feature", map[string][]byte{"main.go": []byte("package main\n\nfunc main() { println(\"AKIA is a prefix\") }\n")})
			},
			want: nil,
		},
		{
			name: "token in an annotated tag's message",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				r.git(t, "tag", "-a", "v1", "-m", "release notes: "+ghToken)
				return base, r.git(t, "rev-parse", "refs/tags/v1")
			},
			want: []string{"github-token @ tag "},
		},
		{
			name: "key spelled as a file name",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				return base, r.commit(t, "x", map[string][]byte{"notes/" + ghToken + ".txt": []byte("nothing\n")})
			},
			want: []string{"github-token @ a file name (object "},
		},
		{
			name: "hostile path names are shown printable",
			build: func(t *testing.T, r *testRepo) (string, string) {
				base := r.commit(t, "base", map[string][]byte{"README": []byte("hello\n")})
				return base, r.commit(t, "x", map[string][]byte{"we\u202eird\tname.txt": []byte(ghToken)})
			},
			want: []string{"github-token @ file we?ird?name.txt (blob "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRepo(t)
			base, tip := tt.build(t, r)
			r.git(t, "update-ref", "refs/remotes/origin/main", base)
			rep, err := Scan(context.Background(), r.opts(), d, []string{tip}, []string{"--glob=refs/remotes/origin/*"}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			got := kinds(rep)
			if len(got) != len(tt.want) {
				t.Fatalf("hits %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("hit %d = %q, want it to contain %q", i, got[i], w)
				}
			}
			for _, h := range rep.Hits() {
				for _, secret := range []string{awsKeyID, ghToken, "b3BlbnNzaC1rZXktdjEAAAAA"} {
					if strings.Contains(h.String(), secret) {
						t.Errorf("hit %q carries the secret", h.String())
					}
				}
			}
			if rep.Incomplete {
				t.Errorf("incomplete: %s", rep.Reason)
			}
		})
	}
}

func TestScanLimitsMakeItIncomplete(t *testing.T) {
	d := secretscan.MustDefault()
	r := newTestRepo(t)
	base := r.commit(t, "base", nil)
	files := map[string][]byte{}
	for i := range 20 {
		files["f"+string(rune('a'+i))+".txt"] = []byte(strings.Repeat(string(rune('a'+i)), 1000))
	}
	tip := r.commit(t, "many", files)
	r.git(t, "update-ref", "refs/remotes/origin/main", base)
	ex := []string{"--glob=refs/remotes/origin/*"}

	rep, err := Scan(context.Background(), r.opts(), d, []string{tip}, ex, Limits{MaxBytes: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Incomplete || rep.Bytes > 5000 {
		t.Fatalf("MaxBytes 5000: incomplete=%v bytes=%d", rep.Incomplete, rep.Bytes)
	}
	hits := rep.Hits()
	if len(hits) != 1 || hits[0].Kind != KindIncomplete {
		t.Fatalf("hits %v, want one %s", hits, KindIncomplete)
	}

	rep, err = Scan(context.Background(), r.opts(), d, []string{tip}, ex, Limits{MaxObjects: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Incomplete || rep.Objects != 0 {
		t.Fatalf("MaxObjects 5: incomplete=%v objects=%d", rep.Incomplete, rep.Objects)
	}
}

func TestScanRefusesBadInput(t *testing.T) {
	d := secretscan.MustDefault()
	r := newTestRepo(t)
	tip := r.commit(t, "base", nil)
	for _, tc := range []struct {
		name    string
		tips    []string
		exclude []string
	}{
		{"option as tip", []string{"--output=/tmp/x"}, nil},
		{"ref name as tip", []string{"main"}, nil},
		{"option as exclusion", []string{tip}, []string{"--output=/tmp/x"}},
		{"option spelled like a selection", []string{tip}, []string{"--all-match"}},
		{"abbreviated id as exclusion", []string{tip}, []string{tip[:12]}},
		{"revision range as exclusion", []string{tip}, []string{tip + ".." + tip}},
		{"missing object", []string{strings.Repeat("ab", 20)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Scan(context.Background(), r.opts(), d, tc.tips, tc.exclude, Limits{}); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

// TestScanExcludesObjectIDs: an object id the remote has, given as an
// exclusion, leaves what it reaches unread, and only that.
func TestScanExcludesObjectIDs(t *testing.T) {
	d := secretscan.MustDefault()
	r := newTestRepo(t)
	base := r.commit(t, "base", map[string][]byte{"config/prod.env": []byte("AWS_ACCESS_KEY_ID=" + awsKeyID + "\n")})
	tip := r.commit(t, "clean", map[string][]byte{"README": []byte("hello\n")})
	rep, err := Scan(context.Background(), r.opts(), d, []string{tip}, []string{base}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 || rep.Objects == 0 {
		t.Fatalf("excluding the base: %d objects, findings %v", rep.Objects, rep.Findings)
	}
	rep, err = Scan(context.Background(), r.opts(), d, []string{tip}, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 {
		t.Fatalf("without the exclusion: findings %v, want the key in the base", rep.Findings)
	}
}

func TestScanFindingsBounded(t *testing.T) {
	d := secretscan.MustDefault()
	r := newTestRepo(t)
	files := map[string][]byte{}
	for i := range 40 {
		files["k"+string(rune('A'+i))+".txt"] = []byte("key " + awsKeyID[:len(awsKeyID)-2] + string(rune('A'+i%26)) + string(rune('A'+i/26)) + "\n")
	}
	tip := r.commit(t, "keys", files)
	rep, err := Scan(context.Background(), r.opts(), d, []string{tip}, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != maxFindings || rep.Objects < 40 {
		t.Fatalf("findings %d objects %d, want %d findings and every object read", len(rep.Findings), rep.Objects, maxFindings)
	}
}

// A blob larger than one scan chunk: a key across the chunk boundary is
// found once, a key just before it once, and memory stays one chunk.
func TestScanLargeBlobChunks(t *testing.T) {
	d := secretscan.MustDefault()
	for _, at := range []int{scanChunk - 10, scanChunk - len(awsKeyID) - 1, scanChunk - scanOverlap + 5, scanChunk + 3} {
		r := newTestRepo(t)
		base := r.commit(t, "base", nil)
		blob := []byte(strings.Repeat("z", 3*scanChunk))
		copy(blob[at:], " "+awsKeyID+" ")
		tip := r.commit(t, "big", map[string][]byte{"big.txt": blob})
		r.git(t, "update-ref", "refs/remotes/origin/main", base)
		rep, err := Scan(context.Background(), r.opts(), d, []string{tip}, []string{"--glob=refs/remotes/origin/*"}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 1 || rep.Findings[0].Kind != secretscan.KindAWSKeyID {
			t.Errorf("key at %d: findings %+v, want one aws-access-key-id", at, rep.Findings)
		}
	}
}
