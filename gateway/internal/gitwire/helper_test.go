package gitwire

import (
	"errors"
	"io"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/gitref"
)

func TestReadHelperRefs(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		refs []AdvertisedRef
		err  string
	}{
		{name: "refs", in: "@refs/heads/main HEAD\n:object-format sha1\n" + idA + " refs/heads/main\n" + idB + " refs/tags/v1\n\n",
			refs: []AdvertisedRef{{idA, "refs/heads/main"}, {idB, "refs/tags/v1"}}},
		{name: "empty repository", in: "\n"},
		{name: "no blank line", in: idA + " refs/heads/main\n", err: "unexpected EOF"},
		{name: "no LF", in: idA + " refs/heads/main", err: "unexpected EOF"},
		{name: "sha256", in: ":object-format sha256\n\n", err: "object format"},
		{name: "upper-case id", in: "ABCDEF" + idA[6:] + " refs/heads/main\n\n", err: "is not"},
		{name: "short id", in: idA[:39] + " refs/heads/main\n\n", err: "is not"},
		{name: "zero id", in: zero + " refs/heads/main\n\n", err: "zero id"},
		{name: "bad name", in: idA + " refs/heads/a..b\n\n", err: "invalid"},
		{name: "outside refs", in: idA + " HEAD\n\n", err: "invalid"},
		{name: "peeled", in: idA + " refs/tags/v1^{}\n\n", err: "invalid"},
		{name: "space in name", in: idA + " refs/heads/a b\n\n", err: "invalid"},
		{name: "control", in: idA + " refs/heads/a\x1bb\n\n", err: "printable"},
		{name: "twice", in: idA + " refs/heads/main\n" + idB + " refs/heads/main\n\n", err: "twice"},
		{name: "unknown line", in: "? refs/heads/main\n\n", err: "is not"},
		{name: "bad symref", in: "@refs/heads/main\n\n", err: "symbolic"},
		{name: "after blank", in: "\n" + idA + " refs/heads/main\n", err: "after"},
		{name: "too many", in: idA + " refs/heads/a\n" + idA + " refs/heads/b\n" + idA + " refs/heads/c\n\n", err: "more than 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, err := ReadHelperRefs(strings.NewReader(tc.in), "sha1", 2)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) != len(tc.refs) {
				t.Fatalf("refs %v, want %v", refs, tc.refs)
			}
			for i := range refs {
				if refs[i] != tc.refs[i] {
					t.Fatalf("ref %d: %v, want %v", i, refs[i], tc.refs[i])
				}
			}
		})
	}
}

// FuzzReadHelperRefs: any input is refused (a protocol error or a
// truncation) or yields distinct refs under refs/ with lower-case, non-zero
// sha1 ids and names check-ref-format accepts, which re-listed read back the
// same.
func FuzzReadHelperRefs(f *testing.F) {
	f.Add("@refs/heads/main HEAD\n" + idA + " refs/heads/main\n" + idB + " refs/tags/v1\n\n")
	f.Add(":object-format sha1\n\n")
	f.Add("\n")
	f.Add(idA + " refs/heads/a..b\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		refs, err := ReadHelperRefs(strings.NewReader(in), "sha1", 64)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error %v is neither a protocol error nor a truncation", err)
			}
			return
		}
		seen := map[string]bool{}
		var b strings.Builder
		for _, r := range refs {
			if !isObjectID(r.ID, 40) || isZeroID(r.ID) || seen[r.Name] || !strings.HasPrefix(r.Name, "refs/") || !gitref.ValidName(r.Name, false, false) {
				t.Fatalf("accepted ref %q %q", r.ID, r.Name)
			}
			seen[r.Name] = true
			b.WriteString(r.ID + " " + r.Name + "\n")
		}
		again, err := ReadHelperRefs(strings.NewReader(b.String()+"\n"), "sha1", 64)
		if err != nil || len(again) != len(refs) {
			t.Fatalf("re-listed refs read %v %v, want %v", again, err, refs)
		}
		for i := range refs {
			if again[i] != refs[i] {
				t.Fatalf("re-listed ref %d: %v, want %v", i, again[i], refs[i])
			}
		}
	})
}
