package builtin

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAnnotationsDeterministicAndLoadable(t *testing.T) {
	a, err := File()
	if err != nil {
		t.Fatal(err)
	}
	b, err := File()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two generations differ")
	}
	var f struct {
		GeneratedAt string                     `json:"generatedAt"`
		Servers     map[string]json.RawMessage `json:"servers"`
	}
	if err := json.Unmarshal(a, &f); err != nil {
		t.Fatal(err)
	}
	if f.GeneratedAt != "" || len(f.Servers) != len(Names) {
		t.Fatalf("generatedAt %q, %d servers", f.GeneratedAt, len(f.Servers))
	}
}
