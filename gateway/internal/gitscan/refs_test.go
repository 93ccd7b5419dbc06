package gitscan

import (
	"bufio"
	"context"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/secretscan"
)

func TestNameHits(t *testing.T) {
	d := secretscan.MustDefault()
	tests := []struct {
		name  string
		names []string
		want  []string // kind @ where
	}{
		{name: "clean", names: []string{"refs/heads/main", "refs/tags/v1.2.3", "refs/heads/AKIA-is-a-prefix"}},
		{name: "key as a branch", names: []string{"refs/heads/main", "refs/heads/" + awsKeyID},
			want: []string{"aws-access-key-id @ ref name 2"}},
		{name: "token as a tag", names: []string{"refs/tags/" + ghToken}, want: []string{"github-token @ ref name 1"}},
		{name: "token inside a longer name", names: []string{"refs/heads/fix-" + ghToken + "-bug"},
			want: []string{"github-token @ ref name 1"}},
		{name: "key between underscores", names: []string{"refs/heads/x_" + awsKeyID + "_y"},
			want: []string{"aws-access-key-id @ ref name 1"}},
		{name: "key between dots", names: []string{"refs/tags/v1." + awsKeyID + ".2"},
			want: []string{"aws-access-key-id @ ref name 1"}},
		{name: "base64 of a key as a branch", names: []string{"refs/heads/wip/" + base64.StdEncoding.EncodeToString([]byte("key="+awsKeyID))},
			want: []string{"aws-access-key-id @ ref name 1 (base64)"}},
		{name: "found in both spellings once", names: []string{"refs/heads/" + awsKeyID + "_x"},
			want: []string{"aws-access-key-id @ ref name 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, h := range NameHits(d, "ref name", tc.names) {
				got = append(got, string(h.Kind)+" @ "+h.Where)
				for _, n := range tc.names {
					if strings.Contains(h.Where, n) || strings.Contains(h.Excerpt, awsKeyID) || strings.Contains(h.Excerpt, ghToken) {
						t.Fatalf("the hit shows the name: %+v", h)
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("hits %q, want %q", got, tc.want)
			}
		})
	}
	if NameHits(nil, "ref name", []string{"refs/heads/" + awsKeyID}) != nil {
		t.Fatal("a nil detector found something")
	}
}

// TestScanTipsReadsWhatTheUpstreamHas: the objects refs point at are read
// whatever the upstream has: a commit message, an annotated tag's message
// and, through a chain of tags, the commit it names; a blob tip; trees are
// skipped; the byte cap makes the scan incomplete, never clean.
func TestScanTipsReadsWhatTheUpstreamHas(t *testing.T) {
	d := secretscan.MustDefault()
	r := newTestRepo(t)
	clean := r.commit(t, "clean", map[string][]byte{"README": []byte("hello\n")})
	leaky := r.commit(t, "debug: token "+ghToken, map[string][]byte{"README": []byte("hello again\n")})
	r.git(t, "tag", "-a", "-m", "release key "+awsKeyID, "t1", clean)
	t1 := r.git(t, "rev-parse", "refs/tags/t1")
	r.git(t, "tag", "-a", "-m", "wraps t1", "t2", t1)
	t2 := r.git(t, "rev-parse", "refs/tags/t2")
	r.git(t, "tag", "-a", "-m", "wraps a commit", "t3", leaky)
	t3 := r.git(t, "rev-parse", "refs/tags/t3")
	blob := r.git(t, "rev-parse", clean+":README")
	tree := r.git(t, "rev-parse", clean+"^{tree}")
	tests := []struct {
		name  string
		tips  []string
		lim   Limits
		want  []string
		incom bool
	}{
		{name: "clean commit", tips: []string{clean}},
		{name: "commit message", tips: []string{leaky}, want: []string{"github-token @ commit " + leaky[:12] + " (message or author)"}},
		{name: "tag message", tips: []string{t1}, want: []string{"aws-access-key-id @ tag " + t1[:12]}},
		{name: "tag of a tag", tips: []string{t2}, want: []string{"aws-access-key-id @ tag " + t1[:12]}},
		{name: "tag of a leaky commit", tips: []string{t3}, want: []string{"github-token @ commit " + leaky[:12] + " (message or author)"}},
		{name: "the same tip twice", tips: []string{leaky, leaky}, want: []string{"github-token @ commit " + leaky[:12] + " (message or author)"}},
		{name: "blob and tree tips", tips: []string{blob, tree}},
		{name: "over the byte cap", tips: []string{leaky}, lim: Limits{MaxBytes: 10}, incom: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := ScanTips(context.Background(), r.opts(), d, tc.tips, tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rep.Findings {
				got = append(got, string(f.Kind)+" @ "+f.Where)
			}
			if !reflect.DeepEqual(got, tc.want) || rep.Incomplete != tc.incom {
				t.Fatalf("findings %q incomplete %v; want %q incomplete %v", got, rep.Incomplete, tc.want, tc.incom)
			}
		})
	}
	if _, err := ScanTips(context.Background(), r.opts(), d, []string{strings.Repeat("0", 40)}, Limits{}); err == nil {
		t.Fatal("a missing object scanned clean")
	}
	if _, err := ScanTips(context.Background(), r.opts(), d, []string{"HEAD"}, Limits{}); err == nil {
		t.Fatal("a revision expression was accepted as a tip")
	}
}

func TestReportMerge(t *testing.T) {
	a := Report{Findings: []Finding{{Hit: secretscan.Hit{Kind: secretscan.KindGitHubToken, Where: "commit x"}, Object: "x"}}, Objects: 1, Bytes: 10}
	b := Report{Findings: []Finding{{Hit: secretscan.Hit{Kind: secretscan.KindGitHubToken, Where: "commit x"}, Object: "x"},
		{Hit: secretscan.Hit{Kind: secretscan.KindAWSKeyID, Where: "tag y"}, Object: "y"}}, Objects: 2, Bytes: 5, Incomplete: true, Reason: "r"}
	a.Merge(b)
	if len(a.Findings) != 2 || a.Objects != 3 || a.Bytes != 15 || !a.Incomplete || a.Reason != "r" {
		t.Fatalf("merged %+v", a)
	}
}

// FuzzTipBatch feeds arbitrary cat-file --batch output for one tip: never a
// panic, never more than the byte cap read, and an error or an incomplete
// report for output that does not match the object asked for.
func FuzzTipBatch(f *testing.F) {
	id := strings.Repeat("ab", 20)
	f.Add(id+" commit 5\nhello\n", int64(100))
	f.Add(id+" tag 60\nobject "+strings.Repeat("cd", 20)+"\ntype commit\ntag v1\n\n", int64(100))
	f.Add(id+" tag 20\nobject "+strings.Repeat("cd", 20), int64(100))
	f.Add(id+" blob 20\n"+"AKIA"+"IOSFODNN7EXAMPLE\n", int64(100))
	f.Add(id+" tree 3\nabc\n", int64(1))
	f.Add(id+" commit 4\nabc\nextra", int64(100))
	f.Add(id+" missing\n", int64(100))
	d := secretscan.MustDefault()
	f.Fuzz(func(t *testing.T, out string, maxBytes int64) {
		if maxBytes <= 0 || maxBytes > 1<<20 {
			maxBytes = 1 << 20
		}
		rep := &Report{}
		targets, err := tipBatch(bufio.NewReader(strings.NewReader(out)), d, []string{id}, maxBytes, rep)
		if rep.Bytes > maxBytes {
			t.Fatalf("read %d bytes past the cap %d", rep.Bytes, maxBytes)
		}
		if err == nil && !rep.Incomplete {
			want := id + " "
			if !strings.HasPrefix(out, want) {
				t.Fatalf("no error for %q", out)
			}
			for _, tg := range targets {
				if !isObjectID(tg) {
					t.Fatalf("target %q is not an object id", tg)
				}
			}
		}
	})
}

// FuzzNameHits: any name gives hits whose location never holds the name.
func FuzzNameHits(f *testing.F) {
	f.Add("refs/heads/" + awsKeyID)
	f.Add("refs/tags/x_" + ghToken + ".y")
	f.Add("refs/heads/main")
	f.Add("")
	d := secretscan.MustDefault()
	f.Fuzz(func(t *testing.T, name string) {
		for _, h := range NameHits(d, "ref name", []string{name}) {
			if h.Where != "ref name 1" && h.Where != "ref name 1 (base64)" {
				t.Fatalf("location %q for %q", h.Where, name)
			}
		}
	})
}

// BenchmarkScanTips reads and scans the tips of a push of 8 refs (commits
// and annotated tags), the cost ScanTips adds to every push.
func BenchmarkScanTips(b *testing.B) {
	d := secretscan.MustDefault()
	r := newTestRepo(b)
	var tips []string
	for i := 0; i < 4; i++ {
		c := r.commit(b, "commit "+strings.Repeat("words ", 40), map[string][]byte{"f": []byte(strings.Repeat("x", i+1))})
		r.git(b, "tag", "-a", "-m", "release notes "+strings.Repeat("more ", 40), "v"+string(rune('0'+i)), c)
		tips = append(tips, c, r.git(b, "rev-parse", "refs/tags/v"+string(rune('0'+i))))
	}
	for b.Loop() {
		if _, err := ScanTips(context.Background(), r.opts(), d, tips, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
