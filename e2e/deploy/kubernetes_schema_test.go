package deploy

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// TestKubernetesSchema checks every rendered object of a built-in kind
// against the Kubernetes OpenAPI schema kustomize embeds (v1.21): a field
// that does not exist (a typo such as readOnlyRootFileSystem) would be
// dropped by the API server's decoder or refused, and the checks above, which
// read the fields by their right names, would not notice it. Custom resources
// (the CloudNativePG Cluster) have no schema here.
func TestKubernetesSchema(t *testing.T) {
	custom := map[string]bool{"postgresql.cnpg.io/v1/Cluster": true}
	for _, c := range k8sCases(t) {
		t.Run(c.name, func(t *testing.T) {
			for _, o := range c.render.Objects {
				what := o.APIVersion + "/" + o.Kind
				rs := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: o.APIVersion, Kind: o.Kind})
				if rs == nil {
					if !custom[what] {
						t.Errorf("%s %s: no schema for a kind the test does not know", what, o.Metadata.Name)
					}
					continue
				}
				var v any
				if err := json.Unmarshal(o.Raw, &v); err != nil {
					t.Fatal(err)
				}
				for _, p := range unknownFields(rs, v, "") {
					t.Errorf("%s %s: unknown field %s", o.Kind, o.Metadata.Name, p)
				}
			}
		})
	}
}

// unknownFields returns the paths of the fields of v that schema rs does not
// define.
func unknownFields(rs *openapi.ResourceSchema, v any, path string) []string {
	if rs == nil || rs.Schema == nil {
		return nil
	}
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if len(rs.Schema.Properties) == 0 {
			return nil // a map (additionalProperties) or free-form object
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := rs.Schema.Properties[k]; !ok {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, unknownFields(rs.Field(k), x[k], path+"."+k)...)
		}
	case []any:
		if !strings.Contains(strings.Join(rs.Schema.Type, ","), "array") {
			return nil
		}
		el := rs.Elements()
		for i, e := range x {
			out = append(out, unknownFields(el, e, path+"["+strconv.Itoa(i)+"]")...)
		}
	}
	return out
}
