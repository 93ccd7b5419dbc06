package secretscan

import (
	"slices"
	"strings"
	"testing"
)

// prefilterCases hold every hint's bytes, some without the hint itself, and
// secrets of every format: the prefilter must change no finding.
var prefilterCases = []string{
	"", "allow", "filesystem__read_text_file", "0195f3c2-7d1e-7a40-9b1c-3f2e1d0c9b8a",
	awsKeyID, "key " + awsKeyID, ghToken, "x " + ghToken + " y", jwt, privateKey, slackHook,
	"https://a:b@c/", "aws_secret_key=" + awsSecret, "AWS_SECRET=" + awsSecret,
	"p:/ /:", "hgp_ ghp", "AIKA ASIA", "ye.J eyJ", "xo x xox-", "sk -ant sk-ant-",
	"exact-secret-value", "value-secret-exact", "\xff\x00eyJ", strings.Repeat("a", prefilterMax+1) + ghToken,
}

// TestPrefilterChangesNothing compares Scan with and without the ByteSet
// prefilter, for loose and strict detectors with exact values.
func TestPrefilterChangesNothing(t *testing.T) {
	for _, loose := range []bool{false, true} {
		d, err := New(Options{Kinds: AllKinds(), Loose: loose, Exact: []Secret{{Label: "token", Value: "exact-secret-value"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range prefilterCases {
			got, want := d.scan(s, true), d.scan(s, false)
			if !slices.Equal(got, want) {
				t.Errorf("loose=%v %q: with prefilter %+v, without %+v", loose, s, got, want)
			}
			if strings.Contains(s, "ghp_") && !strings.HasPrefix(s, "hgp_") && len(got) == 0 {
				t.Errorf("loose=%v %q: GitHub token not found", loose, s)
			}
		}
	}
}

// TestByteSet checks BytesOf, FoldedBytesOf and Contains on their table.
func TestByteSet(t *testing.T) {
	tests := []struct {
		text, sub string
		folded    bool
		want      bool
	}{
		{text: "abc", sub: "cab", want: true},
		{text: "abc", sub: "abd", want: false},
		{text: "", sub: "", want: true},
		{text: "\x00\xff?@", sub: "\xff\x00", want: true},
		{text: "AUTH", sub: "auth", want: false},
		{text: "AUTH", sub: "auth", folded: true, want: true},
		{text: "Bearer", sub: "bearer", folded: true, want: true},
		{text: "bearr", sub: "bearer", folded: true, want: true}, // a set, not a substring
		{text: "[\\]", sub: "{|}", folded: true, want: false},    // only A–Z fold
	}
	for _, tt := range tests {
		set := BytesOf(tt.text)
		if tt.folded {
			set = FoldedBytesOf(tt.text)
		}
		sub := BytesOf(tt.sub)
		if f := BytesOf(tt.text).Folded(); f != FoldedBytesOf(tt.text) {
			t.Errorf("%q: BytesOf(s).Folded() != FoldedBytesOf(s)", tt.text)
		}
		if got := set.Contains(&sub); got != tt.want {
			t.Errorf("%q (folded %v) contains bytes of %q = %v, want %v", tt.text, tt.folded, tt.sub, got, tt.want)
		}
	}
}

// FuzzPrefilter: on any text the prefilter changes no finding, and a
// ByteSet holds a substring's bytes.
func FuzzPrefilter(f *testing.F) {
	for _, s := range prefilterCases {
		f.Add(s, 0, 1)
	}
	loose, err := New(Options{Kinds: AllKinds(), Loose: true, Exact: []Secret{{Label: "token", Value: "exact-secret-value"}}})
	if err != nil {
		f.Fatal(err)
	}
	strict, err := New(Options{Kinds: AllKinds(), Exact: []Secret{{Label: "token", Value: "exact-secret-value"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string, i, j int) {
		for _, d := range []*Detector{loose, strict} {
			if got, want := d.scan(s, true), d.scan(s, false); !slices.Equal(got, want) {
				t.Fatalf("%q: with prefilter %+v, without %+v", s, got, want)
			}
		}
		if len(s) == 0 {
			return
		}
		i, j = abs(i)%len(s), abs(j)%len(s)
		i, j = min(i, j), max(i, j)
		set, folded := BytesOf(s), FoldedBytesOf(s)
		if set.Folded() != folded {
			t.Fatalf("%q: BytesOf(s).Folded() != FoldedBytesOf(s)", s)
		}
		sub, lsub := BytesOf(s[i:j]), BytesOf(asciiLowerForTest(s[i:j]))
		if !set.Contains(&sub) || !folded.Contains(&lsub) {
			t.Fatalf("%q: set lacks bytes of its substring %q", s, s[i:j])
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func asciiLowerForTest(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// TestMayFind: MayFind is false exactly when Scan's prefilter rules out
// every hint, and never when Scan finds something.
func TestMayFind(t *testing.T) {
	for _, loose := range []bool{false, true} {
		d, err := New(Options{Loose: loose})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(prefilterCases, "allow", "inside the sandbox", "AWS", "filesystem__read_text_file") {
			if len(s) > prefilterMax {
				continue
			}
			set := BytesOf(s)
			if !d.MayFind(&set) && len(d.Scan(s)) > 0 {
				t.Errorf("loose=%v %q: MayFind false, Scan found %+v", loose, s, d.Scan(s))
			}
		}
		set := BytesOf("inside the tree")
		if d.MayFind(&set) {
			t.Errorf("loose=%v: MayFind(inside the tree) = true", loose)
		}
	}
}
