package gitwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

const (
	zero = "0000000000000000000000000000000000000000"
	idA  = "1111111111111111111111111111111111111111"
	idB  = "2222222222222222222222222222222222222222"
)

// request builds a receive-pack request: pkt-lines for lines ("" is a
// flush-pkt), then tail raw.
func request(tail string, lines ...string) []byte {
	var b []byte
	for _, l := range lines {
		if l == "" {
			b = AppendFlush(b)
		} else {
			b = AppendString(b, l)
		}
	}
	return append(b, tail...)
}

func TestReaderPackets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		kinds []Kind
		data  []string
		err   string // substring of the error after the packets
	}{
		{name: "data and flush", in: "0009hello0000", kinds: []Kind{Data, Flush}, data: []string{"hello", ""}, err: "EOF"},
		{name: "delim and response end", in: "00010002", kinds: []Kind{Delim, ResponseEnd}, data: []string{"", ""}, err: "EOF"},
		{name: "empty payload", in: "0004", kinds: []Kind{Data}, data: []string{""}, err: "EOF"},
		{name: "0003 is invalid", in: "0003", err: "invalid pkt-line length 0003"},
		{name: "upper-case hex refused", in: "000Ahello1", err: "invalid pkt-line header"},
		{name: "non-hex", in: "00g9hello", err: "invalid pkt-line header"},
		{name: "too long", in: "fff1", err: "exceeds 65520"},
		{name: "truncated header", in: "00", err: "unexpected EOF"},
		{name: "truncated payload", in: "0010abc", err: "unexpected EOF"},
		{name: "sign in header", in: "+009hello", err: "invalid pkt-line header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.in))
			for i, want := range tc.kinds {
				k, p, err := r.Next()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if k != want || string(p) != tc.data[i] {
					t.Fatalf("packet %d: %v %q, want %v %q", i, k, p, want, tc.data[i])
				}
			}
			_, _, err := r.Next()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestReadUpdateRequest(t *testing.T) {
	caps := "\x00 report-status side-band-64k atomic delete-refs ofs-delta agent=git/2.39.5"
	for _, tc := range []struct {
		name string
		in   []byte
		want []Command
		err  string
		pack bool // a pack must follow
		opts []string
	}{
		{
			name: "create and update", pack: true,
			in:   request("PACK...", zero+" "+idA+" refs/heads/feature"+caps, idA+" "+idB+" refs/heads/main\n", ""),
			want: []Command{{Old: zero, New: idA, Ref: "refs/heads/feature"}, {Old: idA, New: idB, Ref: "refs/heads/main"}},
		},
		{
			name: "delete only, no pack",
			in:   request("", idA+" "+zero+" refs/heads/old"+caps, ""),
			want: []Command{{Old: idA, New: zero, Ref: "refs/heads/old"}},
		},
		{
			name: "push options", pack: true, opts: nil,
			in:  request("", zero+" "+idA+" refs/tags/v1\x00report-status push-options", "", "ci.skip", ""),
			err: "push options are not accepted",
		},
		{name: "no capabilities", in: request("", zero+" "+idA+" refs/heads/x", ""), err: "no capability list"},
		{name: "capabilities twice", in: request("", zero+" "+idA+" refs/heads/x"+caps, zero+" "+idB+" refs/heads/y\x00atomic", ""), err: "capabilities after the first command"},
		{name: "unknown capability", in: request("", zero+" "+idA+" refs/heads/x\x00report-status push-cert=abc", ""), err: `capability "push-cert" is not supported`},
		{name: "repeated capability", in: request("", zero+" "+idA+" refs/heads/x\x00atomic atomic", ""), err: "repeated"},
		{name: "capability with a value it takes none", in: request("", zero+" "+idA+" refs/heads/x\x00atomic=1", ""), err: "malformed"},
		{name: "other object format", in: request("", zero+" "+idA+" refs/heads/x\x00object-format=sha256", ""), err: "does not match"},
		{name: "shallow", in: request("", "shallow "+idA, zero+" "+idA+" refs/heads/x"+caps, ""), err: "shallow clone"},
		{name: "push cert", in: request("", "push-cert\x00report-status", ""), err: "signed pushes"},
		{name: "empty", in: request("", ""), err: "no ref update"},
		{name: "no flush", in: request("", zero+" "+idA+" refs/heads/x"+caps), err: "without a flush-pkt"},
		{name: "delim in the list", in: []byte(string(AppendString(nil, zero+" "+idA+" refs/heads/x"+caps)) + "0001"), err: "unexpected delim-pkt"},
		{name: "short id", in: request("", zero+" 1234 refs/heads/x"+caps, ""), err: "malformed object id"},
		{name: "upper-case id", in: request("", zero+" "+strings.ToUpper("abcdef1111111111111111111111111111111111")+" refs/heads/x"+caps, ""), err: "malformed object id"},
		{name: "two zero ids", in: request("", zero+" "+zero+" refs/heads/x"+caps, ""), err: "two zero ids"},
		{name: "four fields", in: request("", zero+" "+idA+" refs/heads/x extra"+caps, ""), err: "malformed ref update"},
		{name: "tab separated", in: request("", zero+"\t"+idA+"\trefs/heads/x"+caps, ""), err: "malformed ref update"},
		{name: "short ref", in: request("", zero+" "+idA+" main"+caps, ""), err: "not a valid ref name"},
		{name: "ref prefix in another case", in: request("", zero+" "+idA+" refs/Heads/main"+caps, ""), err: "must be written"},
		{name: "ref outside heads and tags", in: request("", zero+" "+idA+" refs/notes/x"+caps, ""), err: "outside refs/heads/"},
		{name: "ref with dot-dot", in: request("", zero+" "+idA+" refs/heads/a..b"+caps, ""), err: "not a valid ref name"},
		{name: "ref ending .lock", in: request("", zero+" "+idA+" refs/heads/a.lock"+caps, ""), err: "not a valid ref name"},
		{name: "ref with control char", in: request("", zero+" "+idA+" refs/heads/a\x1bb"+caps, ""), err: "not a valid ref name"},
		{name: "non-ASCII ref", in: request("", zero+" "+idA+" refs/heads/mаin"+caps, ""), err: "not a valid ref name"},
		{name: "same ref twice", in: request("", zero+" "+idA+" refs/heads/x"+caps, idA+" "+idB+" refs/heads/x", ""), err: "updated twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tc.in))
			u, err := ReadUpdateRequest(r, "sha1", DefaultLimits())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("error %v does not wrap ErrProtocol", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Commands) != len(tc.want) {
				t.Fatalf("commands %+v, want %+v", u.Commands, tc.want)
			}
			for i := range tc.want {
				if u.Commands[i] != tc.want[i] {
					t.Fatalf("command %d: %+v, want %+v", i, u.Commands[i], tc.want[i])
				}
			}
			if u.NeedsPack() != tc.pack {
				t.Fatalf("NeedsPack = %v", u.NeedsPack())
			}
			rest, _ := io.ReadAll(r.Rest())
			if tc.pack && !bytes.HasPrefix(rest, []byte("PACK")) {
				t.Fatalf("rest %q: the pack is not left to stream", rest)
			}
		})
	}
}

func TestReadUpdateRequestLimits(t *testing.T) {
	lines := []string{zero + " " + idA + " refs/heads/b0\x00report-status"}
	for i := 1; i < 5; i++ {
		lines = append(lines, zero+" "+idA+" refs/heads/b"+string(rune('0'+i)))
	}
	lines = append(lines, "")
	_, err := ReadUpdateRequest(NewReader(bytes.NewReader(request("", lines...))), "sha1", Limits{MaxCommands: 4})
	if err == nil || !strings.Contains(err.Error(), "more than 4 ref updates") {
		t.Fatalf("error %v", err)
	}
	in := request("", zero+" "+idA+" refs/heads/x\x00report-status push-options", "", "a", "b", "c", "")
	if _, err := ReadUpdateRequest(NewReader(bytes.NewReader(in)), "sha1", Limits{MaxPushOptions: 2}); err == nil || !strings.Contains(err.Error(), "more than 2 push options") {
		t.Fatalf("error %v", err)
	}
	u, err := ReadUpdateRequest(NewReader(bytes.NewReader(in)), "sha1", Limits{MaxPushOptions: 3})
	if err != nil || strings.Join(u.PushOptions, ",") != "a,b,c" {
		t.Fatalf("push options %q, %v", u.PushOptions, err)
	}
}

func TestReadUpdateRequestSHA256(t *testing.T) {
	id := strings.Repeat("a", 64)
	in := request("", strings.Repeat("0", 64)+" "+id+" refs/heads/x\x00report-status object-format=sha256", "")
	u, err := ReadUpdateRequest(NewReader(bytes.NewReader(in)), "sha256", Limits{})
	if err != nil || u.Commands[0].New != id || u.Capabilities.ObjectFormat != "sha256" {
		t.Fatalf("%+v, %v", u, err)
	}
	if _, err := ReadUpdateRequest(NewReader(bytes.NewReader(request("", zero+" "+idA+" refs/heads/x\x00report-status", ""))), "sha256", Limits{}); err == nil {
		t.Fatal("a sha1 id was accepted by a sha256 repository")
	}
}

func TestReportAndSideBand(t *testing.T) {
	var out bytes.Buffer
	caps := Capabilities{SideBand64k: true, ReportStatus: true}
	sb := NewSideBand(&out, caps)
	if err := sb.Progress("waiting for approval of esc-1\x1b[2J"); err != nil {
		t.Fatal(err)
	}
	report := AppendReport(nil, "", []RefStatus{{Ref: "refs/heads/x"}, {Ref: "refs/heads/main", Error: "protected branch\nmain"}})
	if err := sb.Write(BandData, report); err != nil {
		t.Fatal(err)
	}
	if err := sb.Flush(); err != nil {
		t.Fatal(err)
	}
	// Read it back as git would.
	r := NewReader(&out)
	var progress, data []byte
	for {
		k, p, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if k == Flush {
			break
		}
		switch p[0] {
		case BandProgress:
			progress = append(progress, p[1:]...)
		case BandData:
			data = append(data, p[1:]...)
		default:
			t.Fatalf("band %d", p[0])
		}
	}
	if string(progress) != "waiting for approval of esc-1\\x1b[2J\n" {
		t.Fatalf("progress %q: control characters must be escaped", progress)
	}
	inner := NewReader(bytes.NewReader(data))
	var lines []string
	for {
		k, p, err := inner.Next()
		if err != nil {
			t.Fatal(err)
		}
		if k == Flush {
			break
		}
		lines = append(lines, string(p))
	}
	want := []string{"unpack ok\n", "ok refs/heads/x\n", "ng refs/heads/main protected branch\\x0amain\n"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("report %q, want %q", lines, want)
	}
}

func TestSideBandSplitsLargeWrites(t *testing.T) {
	var out bytes.Buffer
	sb := NewSideBand(&out, Capabilities{SideBand: true})
	payload := bytes.Repeat([]byte("x"), 5000)
	if err := sb.Write(BandData, payload); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&out)
	var got []byte
	for {
		k, p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || k != Data {
			t.Fatal(k, err)
		}
		if len(p)+4 > 999 {
			t.Fatalf("side-band packet of %d bytes", len(p)+4)
		}
		got = append(got, p[1:]...)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("payload changed")
	}
	// Without a side band, progress is dropped and data written as is.
	out.Reset()
	sb = NewSideBand(&out, Capabilities{})
	_ = sb.Progress("hidden")
	_ = sb.Write(BandData, []byte("0000"))
	_ = sb.Flush()
	if out.String() != "0000" {
		t.Fatalf("%q", out.String())
	}
}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{in: "plain reason", want: "plain reason"},
		{in: "line\nbreak", want: `line\x0abreak`},
		{in: "bidi \u202egnp.exe", want: `bidi \u202egnp.exe`},
		{in: "zero\u200bwidth", want: `zero\u200bwidth`},
		{in: "bad \xff byte", want: `bad \ufffd byte`},
		{in: "naïve", want: "naïve"},
		{in: strings.Repeat("é", 300), want: strings.Repeat("é", MaxMessage/2) + "…"},
	} {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAdvertisement(t *testing.T) {
	got := string(AppendAdvertisement(nil, "git-receive-pack", nil, []string{"report-status", "delete-refs"}, zero))
	want := "001f# service=git-receive-pack\n0000" +
		string(AppendString(nil, zero+" capabilities^{}\x00report-status delete-refs\n")) + "0000"
	if got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
	got = string(AppendAdvertisement(nil, "git-receive-pack", []AdvertisedRef{{idA, "refs/heads/main"}, {idB, "refs/tags/v1"}}, []string{"atomic"}, zero))
	if !strings.Contains(got, idA+" refs/heads/main\x00atomic\n") || !strings.Contains(got, idB+" refs/tags/v1\n") {
		t.Fatalf("%q", got)
	}
}
