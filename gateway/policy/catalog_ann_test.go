package policy

import (
	"strings"
	"testing"
)

// TestCatalogAnnotationsYieldToFile: a catalog annotation is used for a
// tool nobody else annotates; the annotations file's entry (re-pinned by
// the operator) and a declared annotation win over it; a bad catalog
// entry is an error naming it.
func TestCatalogAnnotationsYieldToFile(t *testing.T) {
	dir := writeDir(t, okPolicy, okAnn, "")
	cat := []ToolAnnotation{
		{Server: "s", Tool: "t", Comment: "catalog", Args: []ArgAnnotation{{Name: "q", Spec: Static(RoleNone)}}},
		{Server: "s", Tool: "extra", Comment: "catalog", Args: []ArgAnnotation{{Name: "q", Spec: Static(RoleNone)}}},
	}
	e, err := LoadDir(dir, Settings{CatalogAnnotations: cat})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := e.Annotation("s", "t"); !ok || a.Comment == "catalog" {
		t.Fatalf("s__t = %+v; want the file's entry", a)
	}
	if a, ok := e.Annotation("s", "extra"); !ok || a.Comment != "catalog" {
		t.Fatalf("s__extra = %+v, %v; want the catalog's entry", a, ok)
	}
	e, err = LoadDir(dir, Settings{Annotations: []ToolAnnotation{{Server: "s", Tool: "extra", Comment: "declared"}}, CatalogAnnotations: cat})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := e.Annotation("s", "extra"); a.Comment != "declared" {
		t.Fatalf("s__extra = %+v; want the declared entry", a)
	}
	_, err = LoadDir(dir, Settings{CatalogAnnotations: []ToolAnnotation{{Server: "s", Tool: "bad", Args: []ArgAnnotation{{Name: "q", Spec: Static("no-such-role")}}}}})
	if err == nil || !strings.Contains(err.Error(), "catalog_annotations[0]") {
		t.Fatalf("bad catalog role: err = %v", err)
	}
}
