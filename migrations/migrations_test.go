package migrations

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

func TestAllEmbedded(t *testing.T) {
	ms, err := All()
	if err != nil {
		t.Fatalf("All: %v", err)
	}
	if len(ms) < 3 {
		t.Fatalf("got %d migrations, want at least 3", len(ms))
	}
	for i, m := range ms {
		if m.Version != i+1 {
			t.Errorf("migration %d has version %d", i, m.Version)
		}
	}
	latest, err := Latest()
	if err != nil || latest != len(ms) {
		t.Errorf("Latest() = %d, %v; want %d", latest, err, len(ms))
	}
}

func TestParse(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []int
		wantErr string
	}{
		{
			name:  "ordered pairs",
			files: fstest.MapFS{"d/0002_b.up.sql": file("B"), "d/0002_b.down.sql": file("b"), "d/0001_a.up.sql": file("A"), "d/0001_a.down.sql": file("a")},
			want:  []int{1, 2},
		},
		{name: "missing down", files: fstest.MapFS{"d/0001_a.up.sql": file("A")}, wantErr: "needs both"},
		{name: "gap", files: fstest.MapFS{"d/0001_a.up.sql": file("A"), "d/0001_a.down.sql": file("a"), "d/0003_c.up.sql": file("C"), "d/0003_c.down.sql": file("c")}, wantErr: "expected version 0002"},
		{name: "bad suffix", files: fstest.MapFS{"d/0001_a.sql": file("A")}, wantErr: "must end in"},
		{name: "short number", files: fstest.MapFS{"d/1_a.up.sql": file("A")}, wantErr: "NNNN_name"},
		{name: "version zero", files: fstest.MapFS{"d/0000_a.up.sql": file("A")}, wantErr: "positive"},
		{name: "bad name", files: fstest.MapFS{"d/0001_A-b.up.sql": file("A")}, wantErr: "may only hold"},
		{name: "two names", files: fstest.MapFS{"d/0001_a.up.sql": file("A"), "d/0001_b.down.sql": file("a")}, wantErr: "also named"},
		{name: "empty file", files: fstest.MapFS{"d/0001_a.up.sql": file("  \n")}, wantErr: "empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := parse(tt.files, "d")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("versions = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("versions = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestFSHoldsEveryMigration: the runner reads FS, the checks read All; both
// must see the same files.
func TestFSHoldsEveryMigration(t *testing.T) {
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := fs.ReadDir(FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2*len(ms) {
		t.Fatalf("FS holds %d files, want %d (an up and a down per migration)", len(entries), 2*len(ms))
	}
	for _, m := range ms {
		for _, dir := range []string{"up", "down"} {
			name := fmt.Sprintf("%04d_%s.%s.sql", m.Version, m.Name, dir)
			body, err := fs.ReadFile(FS(), name)
			if err != nil {
				t.Fatalf("FS: %v", err)
			}
			want := m.Up
			if dir == "down" {
				want = m.Down
			}
			if string(body) != want {
				t.Errorf("FS %s differs from All", name)
			}
		}
	}
}
