package audit

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func spoolOutcomeFor(i int) *ToolCallOutcome {
	return &ToolCallOutcome{
		CallID: fmt.Sprintf("call-%03d", i), SessionID: fmt.Sprintf("s%d", i%3),
		Time:   normalizeTime(time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC)),
		Status: OutcomeOK, Duration: time.Duration(i) * time.Millisecond, ResultBytes: i, Error: "é\n\"quoted\"",
	}
}

func openTestSpool(t *testing.T, dir string, maxRecords int) *Spool {
	t.Helper()
	s, torn, err := OpenSpool(dir, maxRecords)
	if err != nil {
		t.Fatal(err)
	}
	if torn != 0 {
		t.Fatalf("fresh spool reported %d torn bytes", torn)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSpoolKeepsOrderAcrossReopen: what add returned nil for is in the file
// (fsynced before add returns), in order, exactly as given, after a reopen.
func TestSpoolKeepsOrderAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTestSpool(t, dir, 100)
	for i := range 10 {
		kind := spoolOutcome
		if i%4 == 3 {
			kind = spoolUnconfirmed
		}
		if err := s.add(kind, spoolOutcomeFor(i), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, torn, err := OpenSpool(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if torn != 0 || r.Len() != 10 {
		t.Fatalf("reopened: %d entries, %d torn bytes; want 10, 0", r.Len(), torn)
	}
	for i, e := range r.head(100) {
		want := spoolOutcomeFor(i)
		if *e.Outcome != *want {
			t.Errorf("entry %d = %+v, want %+v", i, *e.Outcome, *want)
		}
		if wantKind := map[bool]string{true: spoolUnconfirmed, false: spoolOutcome}[i%4 == 3]; e.Kind != wantKind {
			t.Errorf("entry %d kind %q, want %q", i, e.Kind, wantKind)
		}
	}
	// New ids continue after the old ones.
	if err := r.add(spoolOutcome, spoolOutcomeFor(10), false); err != nil {
		t.Fatal(err)
	}
	if h := r.head(11); h[10].ID <= h[9].ID {
		t.Fatalf("id %d after %d", h[10].ID, h[9].ID)
	}
}

// TestSpoolTornTail: a crash in the middle of an append leaves a partial
// last line; it is dropped on open, the rest kept. Corruption before the
// last line refuses to open.
func TestSpoolTornTail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mangle  func(data []byte) []byte
		want    int  // entries kept
		wantErr bool // open fails
	}{
		{name: "cut mid line", mangle: func(d []byte) []byte { return d[:len(d)-7] }, want: 4},
		{name: "cut before newline", mangle: func(d []byte) []byte { return d[:len(d)-1] }, want: 4},
		{name: "garbage tail", mangle: func(d []byte) []byte { return append(d, "0000zz {\"id\":"...) }, want: 5},
		{name: "bad checksum on last line", mangle: func(d []byte) []byte {
			d[len(d)-3] ^= 1 // inside the JSON of the last line
			return d
		}, want: 4},
		{name: "corrupt middle line", mangle: func(d []byte) []byte {
			d[12] ^= 1
			return d
		}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTestSpool(t, dir, 100)
			for i := range 5 {
				if err := s.add(spoolOutcome, spoolOutcomeFor(i), false); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.Close()
			path := filepath.Join(dir, spoolFile)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.mangle(data), 0o600); err != nil {
				t.Fatal(err)
			}
			r, torn, err := OpenSpool(dir, 100)
			if tc.wantErr {
				if err == nil {
					r.Close()
					t.Fatal("opened a spool corrupt before its last line")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Len() != tc.want {
				t.Fatalf("%d entries kept, want %d", r.Len(), tc.want)
			}
			if tc.want < 5 && torn == 0 {
				t.Error("torn bytes not reported")
			}
			// The torn bytes are gone from the file, and appends go on.
			if err := r.add(spoolOutcome, spoolOutcomeFor(9), false); err != nil {
				t.Fatal(err)
			}
			_ = r.Close()
			again, torn, err := OpenSpool(dir, 100)
			if err != nil || torn != 0 || again.Len() != tc.want+1 {
				t.Fatalf("after append: %v, torn %d, %d entries; want nil, 0, %d", err, torn, again.Len(), tc.want+1)
			}
			again.Close()
		})
	}
}

// TestSpoolBound: the spool holds at most max entries; reservations made
// for calls in flight are honoured before room is given to anyone else, so
// an outcome with a reservation is never refused.
func TestSpoolBound(t *testing.T) {
	s := openTestSpool(t, t.TempDir(), 3)
	for range 2 {
		if err := s.reserve(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.add(spoolOutcome, spoolOutcomeFor(0), false); err != nil {
		t.Fatalf("unreserved add with room: %v", err)
	}
	if err := s.reserve(); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("reserve past the bound: %v, want ErrSpoolFull", err)
	}
	if err := s.add(spoolOutcome, spoolOutcomeFor(1), false); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("unreserved add into reserved room: %v, want ErrSpoolFull", err)
	}
	for i := range 2 {
		if err := s.add(spoolOutcome, spoolOutcomeFor(2+i), true); err != nil {
			t.Fatalf("reserved add %d: %v", i, err)
		}
	}
	if s.Len() != 3 || s.Free() != 0 {
		t.Fatalf("len %d free %d, want 3 0", s.Len(), s.Free())
	}
	// Removing written entries makes room again.
	h := s.head(2)
	if err := s.remove(map[uint64]bool{h[0].ID: true, h[1].ID: true}); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 1 || s.Free() != 2 {
		t.Fatalf("after remove: len %d free %d, want 1 2", s.Len(), s.Free())
	}
	if got := s.head(1)[0].Outcome.CallID; got != "call-003" {
		t.Fatalf("remaining entry %s, want call-003", got)
	}
	if err := s.reserve(); err != nil {
		t.Fatal(err)
	}
	s.release()
	if s.Free() != 2 {
		t.Fatalf("release did not give the room back: free %d", s.Free())
	}
}

// TestSpoolRemoveSurvivesReopen: removed entries stay removed.
func TestSpoolRemoveSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTestSpool(t, dir, 10)
	for i := range 4 {
		if err := s.add(spoolOutcome, spoolOutcomeFor(i), false); err != nil {
			t.Fatal(err)
		}
	}
	h := s.head(4)
	if err := s.remove(map[uint64]bool{h[1].ID: true, h[2].ID: true}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	r, _, err := OpenSpool(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for _, e := range r.head(10) {
		got = append(got, e.Outcome.CallID)
	}
	if fmt.Sprint(got) != "[call-000 call-003]" {
		t.Fatalf("after remove and reopen: %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, spoolFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// FuzzParseSpool: the parser never panics, never accepts a line whose
// checksum does not match, and what it accepts re-encodes to the same bytes.
func FuzzParseSpool(f *testing.F) {
	key := bytes.Repeat([]byte{7}, SpoolKeySize)
	line, _ := encodeSpoolLine(spoolEntry{ID: 1, Kind: spoolOutcome, Outcome: spoolOutcomeFor(1)}, key)
	other, _ := encodeSpoolLine(spoolEntry{ID: 2, Kind: spoolOutcome, Outcome: spoolOutcomeFor(2)}, bytes.Repeat([]byte{8}, SpoolKeySize))
	f.Add(line)
	f.Add(append(append([]byte{}, line...), other...))
	f.Add(append(append([]byte{}, line...), line[:20]...))
	f.Add([]byte("00000000 {}\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, rejected, good, err := parseSpool(data, key)
		if err != nil {
			return
		}
		if good > len(data) {
			t.Fatalf("prefix %d longer than the input %d", good, len(data))
		}
		n := 0
		for _, e := range entries {
			n += e.rawBytes
			if e.Outcome == nil || e.ID == 0 {
				t.Fatalf("incomplete entry accepted: %+v", e)
			}
		}
		for _, r := range rejected {
			n += len(r)
			if _, err := parseSpoolLine(bytes.TrimSuffix(r, []byte("\n")), key); !errors.Is(err, ErrSpoolMAC) {
				t.Fatalf("rejected a line for %v", err)
			}
		}
		if n != good {
			t.Fatalf("entries and rejected lines cover %d bytes, prefix is %d", n, good)
		}
		// Every accepted entry carries this key's MAC: re-encoded, it
		// parses with the key and is refused with any other.
		for _, e := range entries {
			l, err := encodeSpoolLine(e, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parseSpoolLine(bytes.TrimSuffix(l, []byte("\n")), bytes.Repeat([]byte{9}, SpoolKeySize)); !errors.Is(err, ErrSpoolMAC) {
				t.Fatalf("a line verified with another key: %v", err)
			}
		}
	})
}

func BenchmarkSpoolAdd(b *testing.B) {
	s, _, err := OpenSpool(b.TempDir(), b.N+1)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	o := spoolOutcomeFor(1)
	b.ResetTimer()
	for range b.N {
		if err := s.add(spoolOutcome, o, false); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSpoolRefusesForeignLines: a line appended to the spool by another
// writer (a process the gateway started, running as its user, which can
// compute the public checksum but not the MAC) is refused when the spool is
// opened for replay: it is not among the entries, it is kept aside in
// outcomes.spool.rejected and counted, and the gateway's own lines around
// it are replayed.
func TestSpoolRefusesForeignLines(t *testing.T) {
	key := bytes.Repeat([]byte{1}, SpoolKeySize)
	forged := func(e spoolEntry) []byte {
		l, err := encodeSpoolLine(e, bytes.Repeat([]byte{2}, SpoolKeySize)) // not the gateway's key
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// An old-format line (checksum, no MAC) is refused too.
	body := []byte(`{"id":50,"kind":"outcome","spooled_at":"2026-01-02T03:04:05Z","outcome":{"call_id":"forged-old"}}`)
	oldFormat := fmt.Appendf(nil, "%08x %s\n", crc32.Checksum(body, castagnoli), body)
	for _, tc := range []struct {
		name string
		line []byte
	}{
		{name: "forged MAC", line: forged(spoolEntry{ID: 99, Kind: spoolOutcome, Outcome: &ToolCallOutcome{CallID: "forged", SessionID: "s0", Status: OutcomeOK}})},
		{name: "no MAC", line: oldFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _, err := OpenSpoolKey(dir, 100, key)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := s.add(spoolOutcome, spoolOutcomeFor(i), false); err != nil {
					t.Fatal(err)
				}
			}
			// The other writer appends between the gateway's lines.
			f, err := os.OpenFile(filepath.Join(dir, spoolFile), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tc.line); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			if err := s.add(spoolOutcome, spoolOutcomeFor(2), false); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()

			r, _, err := OpenSpoolKey(dir, 100, key)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Rejected() != 1 || r.Len() != 3 {
				t.Fatalf("rejected %d, kept %d; want 1, 3", r.Rejected(), r.Len())
			}
			for i, e := range r.head(10) {
				if e.Outcome.CallID != spoolOutcomeFor(i).CallID {
					t.Fatalf("entry %d is %q", i, e.Outcome.CallID)
				}
			}
			kept, err := os.ReadFile(filepath.Join(dir, spoolRejectedFile))
			if err != nil || !bytes.Equal(kept, tc.line) {
				t.Fatalf("rejected file = %q, %v", kept, err)
			}
			if fi, err := os.Stat(filepath.Join(dir, spoolRejectedFile)); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("rejected file mode = %v, %v", fi, err)
			}
			// The refused line is gone from the spool: a reopen refuses nothing.
			_ = r.Close()
			again, _, err := OpenSpoolKey(dir, 100, key)
			if err != nil || again.Rejected() != 0 || again.Len() != 3 {
				t.Fatalf("reopen: %v, rejected %d, kept %d", err, again.Rejected(), again.Len())
			}
			_ = again.Close()
			// Opened with another key (another run without a key file), every
			// line is refused, none replayed.
			other, _, err := OpenSpoolKey(dir, 100, bytes.Repeat([]byte{3}, SpoolKeySize))
			if err != nil || other.Rejected() != 3 || other.Len() != 0 {
				t.Fatalf("other key: %v, rejected %d, kept %d", err, other.Rejected(), other.Len())
			}
			_ = other.Close()
		})
	}
	if _, _, err := OpenSpoolKey(t.TempDir(), 10, []byte("short")); err == nil {
		t.Fatal("a short key was accepted")
	}
}

// TestSpoolRefusesForeignLinesDuringTheRun: a line another writer appends
// while the gateway runs is never replayed (the spool is replayed from
// what the gateway wrote), and it is reported when the gateway next
// rewrites the file instead of vanishing with the rewrite.
func TestSpoolRefusesForeignLinesDuringTheRun(t *testing.T) {
	key := bytes.Repeat([]byte{1}, SpoolKeySize)
	dir := t.TempDir()
	s, _, err := OpenSpoolKey(dir, 100, key)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		if err := s.add(spoolOutcome, spoolOutcomeFor(i), false); err != nil {
			t.Fatal(err)
		}
	}
	forged, _ := encodeSpoolLine(spoolEntry{ID: 77, Kind: spoolOutcome, Outcome: &ToolCallOutcome{CallID: "forged", SessionID: "s0"}}, bytes.Repeat([]byte{2}, SpoolKeySize))
	f, err := os.OpenFile(filepath.Join(dir, spoolFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write(forged)
	_ = f.Close()
	for _, e := range s.head(10) {
		if e.Outcome.CallID == "forged" {
			t.Fatal("the forged line is among the entries to replay")
		}
	}
	if err := s.remove(map[uint64]bool{s.head(1)[0].ID: true}); err != nil {
		t.Fatal(err)
	}
	if s.Rejected() != 1 || s.Len() != 2 {
		t.Fatalf("rejected %d, kept %d; want 1, 2", s.Rejected(), s.Len())
	}
	kept, err := os.ReadFile(filepath.Join(dir, spoolRejectedFile))
	if err != nil || !bytes.Equal(kept, forged) {
		t.Fatalf("rejected file = %q, %v", kept, err)
	}
}
