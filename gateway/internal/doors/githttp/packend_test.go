package githttp

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackLengthFromTheIndex: the length of the pack index-pack received is
// found from the index it wrote, for a complete pack and for a thin pack
// whose bases --fix-thin appended (the file is then longer than what was
// received); malformed indexes are errors.
func TestPackLengthFromTheIndex(t *testing.T) {
	needGit(t)
	src := t.TempDir()
	run(t, src, "init", "-q", "-b", "main")
	big := strings.Repeat("line of text that deltas well\n", 400)
	writeFile(t, filepath.Join(src, "f.txt"), big)
	run(t, src, "add", "f.txt")
	run(t, src, "commit", "-q", "-m", "one")
	base := run(t, src, "rev-parse", "HEAD")
	writeFile(t, filepath.Join(src, "f.txt"), big+"one more line\n")
	run(t, src, "commit", "-q", "-am", "two")
	tip := run(t, src, "rev-parse", "HEAD")

	// The receiving repository has the base, as the mirror would.
	dst := t.TempDir()
	run(t, dst, "init", "-q", "--bare")
	run(t, src, "push", "-q", dst, base+":refs/heads/main")

	for _, tc := range []struct {
		name string
		args []string
		thin bool
	}{
		{name: "complete pack", args: []string{"pack-objects", "--stdout", "--revs", "-q"}},
		{name: "thin pack", args: []string{"pack-objects", "--stdout", "--revs", "--thin", "-q"}, thin: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("git", tc.args...)
			cmd.Dir = src
			cmd.Stdin = strings.NewReader(tip + "\n^" + base + "\n")
			pack, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			objects := binary.BigEndian.Uint32(pack[8:12])
			q := filepath.Join(t.TempDir(), "q")
			if err := os.MkdirAll(filepath.Join(q, "pack"), 0o755); err != nil {
				t.Fatal(err)
			}
			ip := exec.Command("git", "--git-dir", dst, "index-pack", "--stdin", "--strict", "--fix-thin")
			ip.Env = append(os.Environ(), "GIT_OBJECT_DIRECTORY="+q, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(dst, "objects"))
			ip.Stdin = strings.NewReader(string(pack))
			if out, err := ip.CombinedOutput(); err != nil {
				t.Fatalf("index-pack: %v\n%s", err, out)
			}
			idxs, _ := filepath.Glob(filepath.Join(q, "pack", "pack-*.idx"))
			if len(idxs) != 1 {
				t.Fatalf("indexes %v", idxs)
			}
			idx, err := os.ReadFile(idxs[0])
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(strings.TrimSuffix(idxs[0], ".idx") + ".pack")
			if err != nil {
				t.Fatal(err)
			}
			if tc.thin == (fi.Size() == int64(len(pack))) {
				t.Fatalf("pack file %d bytes, received %d: the case does not test what it says", fi.Size(), len(pack))
			}
			got, err := packLength(idx, objects, fi.Size())
			if err != nil || got != int64(len(pack)) {
				t.Fatalf("packLength = %d, %v; want %d", got, err, len(pack))
			}
			if _, err := packLength(idx, objects+100, fi.Size()); err == nil {
				t.Fatal("more objects in the header than in the index accepted")
			}
			if _, err := packLength(idx[:len(idx)-41], objects, fi.Size()); err == nil {
				t.Fatal("a truncated index accepted")
			}
			bad := append([]byte(nil), idx...)
			bad[7] = 3
			if _, err := packLength(bad, objects, fi.Size()); err == nil {
				t.Fatal("index version 3 accepted")
			}
		})
	}
}

// FuzzPackLength: any index bytes, object count and file size give an
// error or a length within the pack file and at least an empty pack's.
func FuzzPackLength(f *testing.F) {
	hdr := func(n uint32) []byte {
		b := []byte("\xfftOc\x00\x00\x00\x02")
		for i := 0; i < 256; i++ {
			b = binary.BigEndian.AppendUint32(b, n)
		}
		return b
	}
	one := append(hdr(1), make([]byte, 20+4)...)
	one = binary.BigEndian.AppendUint32(one, 12)
	one = append(one, make([]byte, 40)...)
	f.Add(one, uint32(1), int64(100))
	f.Add(one, uint32(0), int64(100))
	large := append(hdr(2), make([]byte, 2*24)...)
	large = binary.BigEndian.AppendUint32(large, 12)
	large = binary.BigEndian.AppendUint32(large, 0x80000000)
	large = binary.BigEndian.AppendUint64(large, 50)
	large = append(large, make([]byte, 40)...)
	f.Add(large, uint32(1), int64(100))
	f.Add(large, uint32(1), int64(60))
	f.Add(hdr(0)[:100], uint32(0), int64(32))
	f.Fuzz(func(t *testing.T, idx []byte, objects uint32, size int64) {
		n, err := packLength(idx, objects, size)
		if err != nil {
			return
		}
		if n > size || (n < packHeaderLen+idxHashLen && n != size) {
			t.Fatalf("packLength = %d for a %d-byte pack file", n, size)
		}
	})
}
