package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// fetchAllowAll is the servers section a test config needs when it is not
// about the fetch allowlist (Parse requires servers.fetch.allowed_domains).
const fetchAllowAll = "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n"

// withFetch returns y with fetchAllowAll appended when y has no top-level
// servers key; a y that names servers is returned as it is (the test says
// what it wants there), and so is y that does not parse as a mapping, so
// parse errors and their line numbers are unchanged.
func withFetch(y string) []byte {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(y), &root); err != nil {
		return []byte(y)
	}
	if len(root.Content) == 0 {
		return []byte(fetchAllowAll)
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return []byte(y)
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "servers" {
			return []byte(y)
		}
	}
	if len(doc.Content) == 0 { // {} or an empty flow mapping
		return []byte(fetchAllowAll)
	}
	if doc.Style&yaml.FlowStyle != 0 {
		return []byte(y)
	}
	if !strings.HasSuffix(y, "\n") {
		y += "\n"
	}
	if body, ok := strings.CutSuffix(y, "...\n"); ok { // keep the end marker last
		return []byte(body + fetchAllowAll + "...\n")
	}
	return []byte(y + fetchAllowAll)
}
