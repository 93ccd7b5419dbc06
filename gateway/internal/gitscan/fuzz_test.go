package gitscan

import (
	"bufio"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/secretscan"
)

// FuzzReadBatch feeds arbitrary cat-file --batch output to the parser: it
// must never panic, never read more than the byte cap into memory for
// scanning, and report an error rather than a clean scan for output that
// does not match the objects asked for.
func FuzzReadBatch(f *testing.F) {
	id := strings.Repeat("ab", 20)
	f.Add(id+" blob 5\nhello\n", int64(100))
	f.Add(id+" blob 20\n"+"AKIA"+"IOSFODNN7EXAMPLE\n", int64(100))
	f.Add(id+" tree 3\nabc\n", int64(1))
	f.Add(id+" blob -1\n\n", int64(100))
	f.Add(id+" blob 99999999999999999999\n", int64(100))
	f.Add(id+" commit 4\nabc", int64(100))
	f.Add("missing\n", int64(100))
	det := secretscan.MustDefault()
	f.Fuzz(func(t *testing.T, out string, maxBytes int64) {
		if maxBytes <= 0 || maxBytes > 1<<20 {
			maxBytes = 1 << 20
		}
		rep := &Report{}
		err := readBatch(bufio.NewReader(strings.NewReader(out)), det, []object{{id: id, path: "p"}}, maxBytes, rep)
		if rep.Bytes > maxBytes {
			t.Fatalf("read %d bytes past the cap %d", rep.Bytes, maxBytes)
		}
		if err == nil && !rep.Incomplete && rep.Objects == 0 {
			// Only a tree (not scanned) may leave nothing read.
			if !strings.HasPrefix(out, id+" tree ") {
				t.Fatalf("no error and nothing read for %q", out)
			}
		}
	})
}
