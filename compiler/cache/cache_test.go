package cache

import (
	"strings"
	"sync"
	"testing"
)

func TestKeyFraming(t *testing.T) {
	tests := []struct {
		name string
		a, b []string
		same bool
	}{
		{name: "identical", a: []string{"x", "y"}, b: []string{"x", "y"}, same: true},
		{name: "shifted boundary", a: []string{"ab", "c"}, b: []string{"a", "bc"}, same: false},
		{name: "extra empty part", a: []string{"a"}, b: []string{"a", ""}, same: false},
		{name: "order", a: []string{"a", "b"}, b: []string{"b", "a"}, same: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Key(tt.a...) == Key(tt.b...); got != tt.same {
				t.Errorf("Key(%q) == Key(%q) is %v, want %v", tt.a, tt.b, got, tt.same)
			}
		})
	}
}

func TestStoreRoundTrip(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := Key("model", "prompt")
	if _, ok, err := s.Get(k); ok || err != nil {
		t.Fatalf("Get on empty store = ok %v, err %v", ok, err)
	}
	if err := s.Put(k, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Get(k)
	if err != nil || !ok || string(got) != `{"a":1}` {
		t.Fatalf("Get = %q, %v, %v", got, ok, err)
	}
}

func TestStoreRejectsBadKeys(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", "../../etc/passwd", "zz" + Key("x")[2:], Key("x") + "0"} {
		t.Run(k, func(t *testing.T) {
			if err := s.Put(k, []byte("x")); err == nil {
				t.Errorf("Put(%q) succeeded", k)
			}
			if _, _, err := s.Get(k); err == nil {
				t.Errorf("Get(%q) succeeded", k)
			}
		})
	}
}

func TestStoreConcurrentPuts(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := Key("same")
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := s.Put(k, []byte("v")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, ok, _ := s.Get(k); !ok || string(got) != "v" {
		t.Fatalf("Get = %q, %v", got, ok)
	}
}

// BenchmarkKey hashes a step of realistic size (a 20 KB system prompt).
func BenchmarkKey(b *testing.B) {
	system := strings.Repeat("constitution and tool annotations ", 600)
	b.ReportAllocs()
	b.SetBytes(int64(len(system)))
	for b.Loop() {
		_ = Key(Version, "anthropic:m", system, `[{"role":"user","content":"compile"}]`, "0")
	}
}
