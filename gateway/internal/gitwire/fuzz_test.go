package gitwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"ironcurtain.dev/gateway/gitref"
)

// FuzzReadUpdateRequest: any byte string either is refused with an error or
// yields commands that each have well-formed ids, a ref the policy accepts,
// no ref twice, and capabilities only from the known list; re-encoding the
// accepted commands parses to the same request.
func FuzzReadUpdateRequest(f *testing.F) {
	f.Add(request("PACK", zero+" "+idA+" refs/heads/feature\x00 report-status side-band-64k", ""))
	f.Add(request("", idA+" "+zero+" refs/heads/old\x00report-status delete-refs", ""))
	f.Add(request("", zero+" "+idA+" refs/heads/x\x00push-options", "", "opt", ""))
	f.Add(request("", "shallow "+idA, ""))
	f.Add([]byte("0000"))
	f.Add([]byte("0001000300040000"))
	f.Fuzz(func(t *testing.T, in []byte) {
		u, err := ReadUpdateRequest(NewReader(bytes.NewReader(in)), "sha1", Limits{MaxCommands: 16, MaxPushOptions: 4})
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error %v is neither a protocol error nor a truncation", err)
			}
			return
		}
		seen := map[string]bool{}
		var lines []string
		for i, c := range u.Commands {
			if !isObjectID(c.Old, 40) || !isObjectID(c.New, 40) || (c.IsCreate() && c.IsDelete()) {
				t.Fatalf("accepted ids %q %q", c.Old, c.New)
			}
			if err := gitref.CheckUpdateRef(c.Ref); err != nil {
				t.Fatalf("accepted ref %q: %v", c.Ref, err)
			}
			if seen[c.Ref] {
				t.Fatalf("ref %q twice", c.Ref)
			}
			seen[c.Ref] = true
			line := c.Old + " " + c.New + " " + c.Ref
			if i == 0 {
				line += "\x00" + capList(u.Capabilities)
			}
			lines = append(lines, line)
		}
		lines = append(lines, "")
		if u.Capabilities.PushOptions {
			lines = append(append(lines, u.PushOptions...), "")
		}
		again, err := ReadUpdateRequest(NewReader(bytes.NewReader(request("", lines...))), "sha1", Limits{MaxCommands: 16, MaxPushOptions: 4})
		if err != nil {
			t.Fatalf("re-encoded request refused: %v", err)
		}
		if len(again.Commands) != len(u.Commands) || again.Capabilities != u.Capabilities || strings.Join(again.PushOptions, "\n") != strings.Join(u.PushOptions, "\n") {
			t.Fatalf("round trip changed the request: %+v vs %+v", again, u)
		}
	})
}

func capList(c Capabilities) string {
	var w []string
	add := func(on bool, s string) {
		if on {
			w = append(w, s)
		}
	}
	add(c.ReportStatus && !c.ReportStatusV2, "report-status")
	add(c.ReportStatusV2, "report-status-v2")
	add(c.SideBand, "side-band")
	add(c.SideBand64k, "side-band-64k")
	add(c.Quiet, "quiet")
	add(c.Atomic, "atomic")
	add(c.DeleteRefs, "delete-refs")
	add(c.OfsDelta, "ofs-delta")
	add(c.PushOptions, "push-options")
	add(c.Agent != "", "agent="+c.Agent)
	add(c.ObjectFormat != "", "object-format="+c.ObjectFormat)
	return strings.Join(w, " ")
}

// FuzzSanitize: the result is valid UTF-8, one line without control or
// format characters, and bounded.
func FuzzSanitize(f *testing.F) {
	f.Add("reason\n\x1b[31m\u202e")
	f.Add(strings.Repeat("\xff", 500))
	f.Fuzz(func(t *testing.T, s string) {
		got := Sanitize(s)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 %q", got)
		}
		if len(got) > MaxMessage+len("…") {
			t.Fatalf("%d bytes", len(got))
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || !isPrintableWide(r) {
				t.Fatalf("%q kept %U", got, r)
			}
		}
	})
}

func BenchmarkReadUpdateRequest(b *testing.B) {
	lines := []string{zero + " " + idA + " refs/heads/feature\x00 report-status side-band-64k atomic ofs-delta agent=git/2.39.5"}
	for i := 0; i < 15; i++ {
		lines = append(lines, idA+" "+idB+" refs/heads/topic-"+string(rune('a'+i)))
	}
	in := request("PACK", append(lines, "")...)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ReadUpdateRequest(NewReader(bytes.NewReader(in)), "sha1", Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
