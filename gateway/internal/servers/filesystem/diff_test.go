package filesystem

import (
	"fmt"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	header := "Index: f\n===================================================================\n--- f\toriginal\n+++ f\tmodified\n"
	many := func(n int) string {
		var sb strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&sb, "l%d\n", i)
		}
		return sb.String()
	}
	cases := []struct {
		name string
		a, b string
		want string
	}{
		{name: "identical", a: "x\n", b: "x\n", want: header},
		{name: "from empty", a: "", b: "a\nb\n", want: header + "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{name: "to empty", a: "a\n", b: "", want: header + "@@ -1,1 +0,0 @@\n-a\n"},
		{name: "append", a: "a\nb\n", b: "a\nb\nc\n", want: header + "@@ -1,2 +1,3 @@\n a\n b\n+c\n"},
		{name: "no newline at end", a: "a\nb", b: "a\nc", want: header +
			"@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{name: "newline added", a: "a", b: "a\n", want: header +
			"@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+a\n"},
		{name: "context is three lines", a: many(10), b: strings.Replace(many(10), "l5\n", "L5\n", 1), want: header +
			"@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+L5\n l6\n l7\n l8\n"},
		{name: "distant changes make two hunks", a: many(20),
			b: strings.Replace(strings.Replace(many(20), "l2\n", "L2\n", 1), "l19\n", "L19\n", 1), want: header +
				"@@ -1,5 +1,5 @@\n l1\n-l2\n+L2\n l3\n l4\n l5\n" +
				"@@ -16,5 +16,5 @@\n l16\n l17\n l18\n-l19\n+L19\n l20\n"},
		{name: "close changes share a hunk", a: many(12),
			b: strings.Replace(strings.Replace(many(12), "l3\n", "L3\n", 1), "l9\n", "L9\n", 1), want: header +
				"@@ -1,12 +1,12 @@\n l1\n l2\n-l3\n+L3\n l4\n l5\n l6\n l7\n l8\n-l9\n+L9\n l10\n l11\n l12\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := unifiedDiff("f", tc.a, tc.b)
			if got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			if err := checkPatch(got, tc.a, tc.b); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDiffFallbackStaysCorrect: beyond diffMaxD the middle becomes one
// replacement, still a valid patch.
func TestDiffFallbackStaysCorrect(t *testing.T) {
	var a, b strings.Builder
	for i := 0; i < 3*diffMaxD; i++ {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	d := unifiedDiff("f", a.String(), b.String())
	if err := checkPatch(d, a.String(), b.String()); err != nil {
		t.Fatal(err)
	}
}

// checkPatch applies the unified diff d to a and compares the result to b.
func checkPatch(d, a, b string) error {
	lines := strings.SplitAfter(d, "\n")
	if len(lines) < 4 {
		return fmt.Errorf("short header")
	}
	lines = lines[4:]
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	src := splitLines(a)
	var out []string
	cursor := 0
	i := 0
	for i < len(lines) {
		var os, ol, ns, nl int
		if _, err := fmt.Sscanf(lines[i], "@@ -%d,%d +%d,%d @@\n", &os, &ol, &ns, &nl); err != nil {
			return fmt.Errorf("bad hunk header %q: %v", lines[i], err)
		}
		i++
		start := os - 1
		if ol == 0 {
			start = os
		}
		if start < cursor || start > len(src) {
			return fmt.Errorf("hunk start %d out of order (cursor %d)", start, cursor)
		}
		out = append(out, src[cursor:start]...)
		cursor = start
		if len(out)+1 != ns && !(nl == 0 && len(out) == ns) {
			return fmt.Errorf("new start %d, have %d lines", ns, len(out))
		}
		gotOld, gotNew := 0, 0
		for gotOld < ol || gotNew < nl {
			if i >= len(lines) {
				return fmt.Errorf("hunk truncated")
			}
			l := lines[i]
			i++
			kind, body := l[0], l[1:]
			if i < len(lines) && lines[i] == "\\ No newline at end of file\n" {
				body = strings.TrimSuffix(body, "\n")
				i++
			}
			switch kind {
			case ' ', '-':
				if cursor >= len(src) || src[cursor] != body {
					return fmt.Errorf("line %d: context/deletion %q does not match %q", cursor+1, body, src[min(cursor, len(src)-1)])
				}
				cursor++
				gotOld++
				if kind == ' ' {
					out = append(out, body)
					gotNew++
				}
			case '+':
				out = append(out, body)
				gotNew++
			default:
				return fmt.Errorf("bad line %q", l)
			}
		}
		if gotOld != ol || gotNew != nl {
			return fmt.Errorf("hunk counts %d/%d, header %d/%d", gotOld, gotNew, ol, nl)
		}
	}
	out = append(out, src[cursor:]...)
	if got := strings.Join(out, ""); got != b {
		return fmt.Errorf("patched result %q, want %q", got, b)
	}
	return nil
}

func FuzzUnifiedDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\n")
	f.Add("", "x")
	f.Add("x", "")
	f.Add("a\nb", "a\nb\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\nX\n4\n5\n6\n7\nY\n9\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 1<<16 || len(b) > 1<<16 {
			return
		}
		d := unifiedDiff("f", a, b)
		if err := checkPatch(d, a, b); err != nil {
			t.Fatalf("a=%q b=%q\n%s\n%v", a, b, d, err)
		}
	})
}

func BenchmarkUnifiedDiff(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&sb, "\tline %d of some source file\n", i)
	}
	a := sb.String()
	c := strings.Replace(strings.Replace(a, "line 100 ", "LINE 100 ", 1), "line 1500 ", "LINE 1500 ", 1)
	b.ReportAllocs()
	for b.Loop() {
		_ = unifiedDiff("f", a, c)
	}
}
