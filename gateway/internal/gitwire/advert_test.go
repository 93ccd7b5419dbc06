package gitwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/gitref"
)


// advert builds an info/refs answer from raw pkt-line payloads.
func advert(service string, lines ...string) []byte {
	b := AppendString(nil, "# service="+service+"\n")
	b = AppendFlush(b)
	for _, l := range lines {
		b = AppendString(b, l)
	}
	return AppendFlush(b)
}

func TestReadAdvertisement(t *testing.T) {
	const svc = "git-receive-pack"
	for _, tc := range []struct {
		name string
		in   []byte
		refs []AdvertisedRef
		caps []string
		err  string
	}{
		{name: "refs", in: advert(svc, idA+" refs/heads/main\x00report-status delete-refs object-format=sha1\n", idB+" refs/tags/v1\n", idB+" .have\n"),
			refs: []AdvertisedRef{{idA, "refs/heads/main"}, {idB, "refs/tags/v1"}}, caps: []string{"report-status", "delete-refs", "object-format=sha1"}},
		{name: "empty repository", in: advert(svc, zero+" capabilities^{}\x00report-status\n"), caps: []string{"report-status"}},
		{name: "round trip of our own", in: AppendAdvertisement(nil, svc, []AdvertisedRef{{idA, "refs/heads/x"}}, []string{"ofs-delta"}, zero),
			refs: []AdvertisedRef{{idA, "refs/heads/x"}}, caps: []string{"ofs-delta"}},
		{name: "other service", in: advert("git-upload-pack", idA+" refs/heads/main\x00\n"), err: "service line"},
		{name: "no flush after service", in: append(AppendString(nil, "# service="+svc+"\n"), AppendString(nil, idA+" refs/heads/main\x00\n")...), err: "flush-pkt"},
		{name: "protocol v2", in: advert(svc, "version 2\n"), err: "only v0"},
		{name: "no caps on first", in: advert(svc, idA+" refs/heads/main\n"), err: "no capabilities"},
		{name: "caps twice", in: advert(svc, idA+" refs/heads/main\x00a\n", idB+" refs/heads/x\x00b\n"), err: "after the first"},
		{name: "sha256 upstream", in: advert(svc, idA+" refs/heads/main\x00object-format=sha256\n"), err: "object format"},
		{name: "upper-case id", in: advert(svc, strings.ToUpper("abcdef"+idA[6:])+" refs/heads/main\x00\n"), err: "is not"},
		{name: "short id", in: advert(svc, idA[:39]+" refs/heads/main\x00\n"), err: "is not"},
		{name: "bad name", in: advert(svc, idA+" refs/heads/a..b\x00\n"), err: "invalid"},
		{name: "name outside refs", in: advert(svc, idA+" heads/main\x00\n"), err: "invalid"},
		{name: "peeled", in: advert(svc, idA+" refs/tags/v1\x00\n", idB+" refs/tags/v1^{}\n"), err: "invalid"},
		{name: "control in name", in: advert(svc, idA+" refs/heads/a\x1bb\x00\n"), err: "invalid"},
		{name: "twice", in: advert(svc, idA+" refs/heads/main\x00\n", idB+" refs/heads/main\n"), err: "twice"},
		{name: "zero id ref", in: advert(svc, zero+" refs/heads/main\x00\n"), err: "zero id"},
		{name: "capabilities^{} later", in: advert(svc, idA+" refs/heads/main\x00\n", zero+" capabilities^{}\n"), err: "alone"},
		{name: "ref after capabilities^{}", in: advert(svc, zero+" capabilities^{}\x00\n", idA+" refs/heads/main\n"), err: "empty repository"},
		{name: "unprintable caps", in: advert(svc, idA+" refs/heads/main\x00a\x01b\n"), err: "printable"},
		{name: "no refs", in: advert(svc), err: "no ref"},
		{name: "delim", in: append(advert(svc, idA+" refs/heads/main\x00\n")[:len(advert(svc, idA+" refs/heads/main\x00\n"))-4], "0001"...), err: "delim"},
		{name: "trailing data", in: append(advert(svc, idA+" refs/heads/main\x00\n"), "x"...), err: "after"},
		{name: "truncated", in: advert(svc, idA+" refs/heads/main\x00\n")[:40], err: "unexpected EOF"},
		{name: "too many", in: advert(svc, idA+" refs/heads/a\x00\n", idA+" refs/heads/b\n", idA+" refs/heads/c\n"), err: "more than 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, caps, err := ReadAdvertisement(NewReader(bytes.NewReader(tc.in)), svc, "sha1", 2)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) != len(tc.refs) || strings.Join(caps, " ") != strings.Join(tc.caps, " ") {
				t.Fatalf("refs %v caps %q, want %v %q", refs, caps, tc.refs, tc.caps)
			}
			for i := range refs {
				if refs[i] != tc.refs[i] {
					t.Fatalf("ref %d: %v, want %v", i, refs[i], tc.refs[i])
				}
			}
		})
	}
}

// FuzzReadAdvertisement: any byte string is refused (a protocol error or a
// truncation) or yields distinct refs with lower-case sha1 ids and names
// check-ref-format accepts, which re-encode to an advertisement that reads
// back the same.
func FuzzReadAdvertisement(f *testing.F) {
	const svc = "git-receive-pack"
	f.Add(advert(svc, idA+" refs/heads/main\x00report-status delete-refs\n", idB+" refs/tags/v1\n", idB+" .have\n"))
	f.Add(advert(svc, zero+" capabilities^{}\x00report-status\n"))
	f.Add(advert(svc, "version 2\n"))
	f.Add([]byte("0000"))
	f.Fuzz(func(t *testing.T, in []byte) {
		refs, caps, err := ReadAdvertisement(NewReader(bytes.NewReader(in)), svc, "sha1", 64)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error %v is neither a protocol error nor a truncation", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, r := range refs {
			if !isObjectID(r.ID, 40) || isZeroID(r.ID) || seen[r.Name] || !gitref.ValidName(r.Name, false, false) {
				t.Fatalf("accepted ref %q %q", r.ID, r.Name)
			}
			seen[r.Name] = true
		}
		for _, c := range caps {
			if c == "" || !printableASCII(c) || strings.Contains(c, " ") {
				t.Fatalf("accepted capability %q", c)
			}
		}
		again, caps2, err := ReadAdvertisement(NewReader(bytes.NewReader(AppendAdvertisement(nil, svc, refs, caps, zero))), svc, "sha1", 64)
		if err != nil || len(again) != len(refs) || strings.Join(caps2, " ") != strings.Join(caps, " ") {
			t.Fatalf("re-encoded advertisement reads %v %q %v, want %v %q", again, caps2, err, refs, caps)
		}
		for i := range refs {
			if again[i] != refs[i] {
				t.Fatalf("re-encoded ref %d: %v, want %v", i, again[i], refs[i])
			}
		}
	})
}
