package mcphub

import (
	"strings"
	"testing"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/servers"
)

func FuzzCapResult(f *testing.F) {
	f.Add("hello", "img", 3)
	f.Add("ééé", "", 1)
	f.Add("", "AAAA", 0)
	f.Fuzz(func(t *testing.T, text, data string, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		in := servers.Result{Content: []servers.Content{{Type: "text", Text: text}, {Type: "image", Data: data, MIMEType: "image/png"}, {Type: "text", Text: text}}}
		out, size, cut := capResult(in, max)
		if size != 2*len(text)+len(data) {
			t.Fatalf("size %d", size)
		}
		if !cut {
			if resultSize(out) != size {
				t.Fatal("uncut result changed")
			}
			return
		}
		last := out.Content[len(out.Content)-1]
		if !strings.HasPrefix(last.Text, "[result cut by the gateway") {
			t.Fatalf("no cut marker: %+v", out)
		}
		if body := resultSize(out) - len(last.Text); body > max {
			t.Fatalf("cut result carries %d bytes > %d", body, max)
		}
		for _, c := range out.Content {
			if utf8.ValidString(text) && !utf8.ValidString(c.Text) {
				t.Fatalf("cut produced invalid UTF-8 %q", c.Text)
			}
		}
		if in.Content[0].Text != text {
			t.Fatal("input modified")
		}
	})
}

func FuzzSafeName(f *testing.F) {
	f.Add("files__read")
	f.Add("a\x00b\nc\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		out := safeName(s)
		if !utf8.ValidString(out) || len(out) > 128+len("…") {
			t.Fatalf("safeName(%q) = %q", s, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("control character in %q", out)
			}
		}
	})
}
