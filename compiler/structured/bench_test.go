package structured

import (
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

type benchRule struct {
	Name string         `json:"name"`
	If   map[string]any `json:"if"`
	Then string         `json:"then"`
}

type benchReply struct {
	Rules []benchRule `json:"rules"`
}

func benchSchema() *jsonschema.Schema {
	cond := Object(map[string]*jsonschema.Schema{
		"server": MinItems(Array(Const("filesystem")), 1),
		"tool":   Array(Enum("read_file", "write_file", "move_file", "list_directory")),
		"roles":  Array(Enum("read-path", "write-path", "delete-path")),
		"paths":  Object(map[string]*jsonschema.Schema{"roles": Array(Enum("read-path", "write-path")), "within": Pattern(`^(~|~/.*|/.*)$`, "")}, "roles", "within"),
	}, "server")
	return Object(map[string]*jsonschema.Schema{
		"rules": Array(Object(map[string]*jsonschema.Schema{"name": Pattern("^filesystem-[a-z0-9-]+$", ""), "if": cond, "then": Enum("allow", "escalate")}, "name", "if", "then")),
	}, "rules")
}

// BenchmarkDecode validates and decodes a 20-rule compile reply: the work
// done for every model reply and every cache hit.
func BenchmarkDecode(b *testing.B) {
	var rules []string
	for i := range 20 {
		rules = append(rules, `{"name":"filesystem-r`+string(rune('a'+i))+`","if":{"server":["filesystem"],"tool":["read_file"],"paths":{"roles":["read-path"],"within":"~/Documents"}},"then":"allow"}`)
	}
	text := "```json\n{\"rules\":[" + strings.Join(rules, ",") + "]}\n```"
	schema := benchSchema()
	resolved, err := schema.Resolve(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		raw, err := extractJSON(text)
		if err != nil {
			b.Fatal(err)
		}
		v, err := decode[benchReply](raw, schema, resolved, nil)
		if err != nil || len(v.Rules) != 20 {
			b.Fatal(err)
		}
	}
}
