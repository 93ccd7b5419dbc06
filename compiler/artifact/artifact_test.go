package artifact

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteIsStableAndAtomic(t *testing.T) {
	dir := t.TempDir()
	v := map[string]any{"b": []string{"<x>", "&"}, "a": 1}
	if err := Write(dir, "x.json", v); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "x.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": 1,\n  \"b\": [\n    \"<x>\",\n    \"&\"\n  ]\n}\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestReadOptionalAndRemove(t *testing.T) {
	dir := t.TempDir()
	b, err := ReadOptional(filepath.Join(dir, "missing.json"))
	if b != nil || err != nil {
		t.Fatalf("ReadOptional(missing) = %q, %v", b, err)
	}
	if err := Remove(dir, "missing.json"); err != nil {
		t.Fatal(err)
	}
}

func TestTimestamp(t *testing.T) {
	ts := time.Date(2026, 4, 26, 21, 38, 47, 257_000_000, time.FixedZone("x", 3600))
	if got := Timestamp(ts); got != "2026-04-26T20:38:47.257Z" {
		t.Errorf("Timestamp = %s", got)
	}
}
