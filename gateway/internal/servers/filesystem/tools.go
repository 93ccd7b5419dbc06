package filesystem

import (
	"encoding/json"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// Argument roles used by the annotations (the policy engine's registry).
const (
	roleRead   = policy.RoleReadPath
	roleWrite  = policy.RoleWritePath
	roleDelete = policy.RoleDeletePath
	roleNone   = policy.RoleNone
)

// param declares one argument: its check, its JSON Schema and its roles.
type param struct {
	spec  argSpec
	desc  string
	enum  []string
	roles policy.ArgSpec
}

// toolDef declares one tool.
type toolDef struct {
	name    string
	comment string // annotation comment
	desc    string // description shown to the agent
	params  []param
	run     func(*Server) handler
}

func pathParam(name, desc string, roles ...policy.Role) param {
	return param{spec: argSpec{name: name, kind: kindString, required: true}, desc: desc, roles: policy.Static(roles...)}
}

func opt(name string, kind argKind, desc string) param {
	return param{spec: argSpec{name: name, kind: kind}, desc: desc, roles: policy.Static(roleNone)}
}

// toolDefs is the tool set of the reference MCP filesystem server, with the
// same names and arguments, and the annotations of the original's
// tool-annotations.json.
var toolDefs = []toolDef{
	{
		name:    "read_text_file",
		comment: "Reads the contents of a file as text, optionally only the first or last lines.",
		desc: "Read the complete contents of a file as text. Use 'head' to read only the first N lines " +
			"or 'tail' for the last N lines (not both). Only works within the sandbox.",
		params: []param{
			pathParam("path", "Absolute path of the file.", roleRead),
			opt("head", kindInt, "If set, return only the first N lines."),
			opt("tail", kindInt, "If set, return only the last N lines."),
		},
		run: func(s *Server) handler { return s.readTextFile },
	},
	{
		name:    "read_file",
		comment: "Deprecated alias of read_text_file.",
		desc:    "Read the complete contents of a file as text. DEPRECATED: use read_text_file.",
		params: []param{
			pathParam("path", "Absolute path of the file.", roleRead),
			opt("head", kindInt, "If set, return only the first N lines."),
			opt("tail", kindInt, "If set, return only the last N lines."),
		},
		run: func(s *Server) handler { return s.readTextFile },
	},
	{
		name:    "read_media_file",
		comment: "Reads an image or audio file and returns it base64-encoded.",
		desc:    "Read an image or audio file. Returns the base64-encoded data and MIME type. Only works within the sandbox.",
		params:  []param{pathParam("path", "Absolute path of the file.", roleRead)},
		run:     func(s *Server) handler { return s.readMediaFile },
	},
	{
		name:    "read_multiple_files",
		comment: "Reads several files at once.",
		desc: "Read the contents of several files at once. Each file's content is returned with its path; " +
			"a failed read does not stop the others. Only works within the sandbox.",
		params: []param{{
			spec:  argSpec{name: "paths", kind: kindStrings, required: true},
			desc:  "Absolute paths of the files to read.",
			roles: policy.Static(roleRead),
		}},
		run: func(s *Server) handler { return s.readMultipleFiles },
	},
	{
		name:    "write_file",
		comment: "Creates a file or overwrites an existing one.",
		desc: "Create a new file or completely overwrite an existing file with new content. " +
			"Only works within the sandbox.",
		params: []param{
			pathParam("path", "Absolute path of the file.", roleWrite),
			{spec: argSpec{name: "content", kind: kindString, required: true}, desc: "The new content.", roles: policy.Static(roleNone)},
		},
		run: func(s *Server) handler { return s.writeFile },
	},
	{
		name:    "edit_file",
		comment: "Edits a text file by replacing text; with dryRun it only reads the file and returns the diff.",
		desc: "Make line-based edits to a text file. Each edit replaces an exact text (or the same lines up to " +
			"whitespace) with new text. Returns a git-style diff. With dryRun the file is not changed. " +
			"Only works within the sandbox.",
		params: []param{
			{
				spec: argSpec{name: "path", kind: kindString, required: true},
				desc: "Absolute path of the file.",
				roles: policy.ArgSpec{
					Default: []policy.Role{roleRead, roleWrite},
					When: []policy.ConditionalRoles{{
						Condition: policy.ArgCondition{Arg: "dryRun", Equals: true},
						Roles:     []policy.Role{roleRead},
					}},
				},
			},
			{spec: argSpec{name: "edits", kind: kindEdits, required: true}, desc: "Edits applied in order.", roles: policy.Static(roleNone)},
			opt("dryRun", kindBool, "Preview the changes as a diff without writing them."),
		},
		run: func(s *Server) handler { return s.editFile },
	},
	{
		name:    "create_directory",
		comment: "Creates a directory and any missing parents.",
		desc: "Create a directory, including missing parents. Succeeds if it already exists. " +
			"Only works within the sandbox.",
		params: []param{pathParam("path", "Absolute path of the directory.", roleWrite)},
		run:    func(s *Server) handler { return s.createDirectory },
	},
	{
		name:    "list_directory",
		comment: "Lists the entries of a directory.",
		desc:    "List the files and directories in a directory, marked [FILE] or [DIR]. Only works within the sandbox.",
		params:  []param{pathParam("path", "Absolute path of the directory.", roleRead)},
		run:     func(s *Server) handler { return s.listDirectory },
	},
	{
		name:    "list_directory_with_sizes",
		comment: "Lists the entries of a directory with their sizes.",
		desc: "List the files and directories in a directory with sizes and a summary. " +
			"Only works within the sandbox.",
		params: []param{
			pathParam("path", "Absolute path of the directory.", roleRead),
			{spec: argSpec{name: "sortBy", kind: kindString}, desc: "Sort entries by name (default) or size.",
				enum: []string{"name", "size"}, roles: policy.Static(roleNone)},
		},
		run: func(s *Server) handler { return s.listDirectoryWithSizes },
	},
	{
		name:    "directory_tree",
		comment: "Returns the recursive tree of a directory as JSON.",
		desc: "Get a recursive tree of files and directories as JSON: each entry has 'name', 'type' " +
			"(file/directory) and, for directories, 'children'. Symbolic links are not followed. " +
			"Only works within the sandbox.",
		params: []param{
			pathParam("path", "Absolute path of the directory.", roleRead),
			opt("excludePatterns", kindStrings, "Glob patterns (relative to path) to leave out; a plain name is excluded at any depth."),
		},
		run: func(s *Server) handler { return s.directoryTree },
	},
	{
		name:    "move_file",
		comment: "Moves or renames a file or directory; the source is removed from its old place.",
		desc: "Move or rename a file or directory. Fails if the destination exists. " +
			"Both paths must be within the sandbox.",
		params: []param{
			pathParam("source", "Absolute path to move.", roleRead, roleDelete),
			pathParam("destination", "Absolute new path.", roleWrite),
		},
		run: func(s *Server) handler { return s.moveFile },
	},
	{
		name:    "search_files",
		comment: "Searches a directory tree for paths matching a glob pattern.",
		desc: "Recursively search for files and directories whose path relative to 'path' matches a glob " +
			"('*.go' in that directory, '**/*.go' at any depth). Returns full paths. Symbolic links are not " +
			"followed. Only searches within the sandbox.",
		params: []param{
			pathParam("path", "Absolute path of the directory to search.", roleRead),
			{spec: argSpec{name: "pattern", kind: kindString, required: true}, desc: "Glob pattern.", roles: policy.Static(roleNone)},
			opt("excludePatterns", kindStrings, "Glob patterns to leave out; a plain name is excluded at any depth."),
		},
		run: func(s *Server) handler { return s.searchFiles },
	},
	{
		name:    "get_file_info",
		comment: "Returns metadata of a file or directory.",
		desc: "Get metadata of a file or directory: size, times, type and permissions. " +
			"Only works within the sandbox.",
		params: []param{pathParam("path", "Absolute path.", roleRead)},
		run:    func(s *Server) handler { return s.getFileInfo },
	},
	{
		name:    "list_allowed_directories",
		comment: "Names the directory the server may access.",
		desc:    "List the directories this server may access (the sandbox); everything beneath them is accessible.",
		run:     func(s *Server) handler { return s.listAllowedDirectories },
	},
}

// toolArgs maps each tool to its argument checks.
var toolArgs = func() map[string][]argSpec {
	m := make(map[string][]argSpec, len(toolDefs))
	for _, d := range toolDefs {
		specs := make([]argSpec, len(d.params))
		for i, p := range d.params {
			specs[i] = p.spec
		}
		m[d.name] = specs
	}
	return m
}()

// toolSet builds the public tool list and the handler table.
func (s *Server) toolSet() ([]servers.Tool, map[string]handler) {
	tools := make([]servers.Tool, 0, len(toolDefs))
	handlers := make(map[string]handler, len(toolDefs))
	for _, d := range toolDefs {
		schema := inputSchema(d.params)
		ann := policy.ToolAnnotation{
			Tool:        d.name,
			Server:      ServerName,
			Comment:     d.comment,
			Args:        make([]policy.ArgAnnotation, len(d.params)),
			InputSchema: schema,
		}
		for i, p := range d.params {
			ann.Args[i] = policy.ArgAnnotation{Name: p.spec.name, Spec: p.roles}
		}
		tools = append(tools, servers.Tool{Name: d.name, Description: d.desc, InputSchema: schema, Annotation: ann})
		handlers[d.name] = d.run(s)
	}
	return tools, handlers
}

// inputSchema renders the JSON Schema of a tool's arguments.
func inputSchema(params []param) json.RawMessage {
	props := make(map[string]any, len(params))
	required := []string{}
	for _, p := range params {
		props[p.spec.name] = propertySchema(p)
		if p.spec.required {
			required = append(required, p.spec.name)
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		schema["required"] = required
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic("filesystem: encoding input schema: " + err.Error()) // static data
	}
	return b
}

func propertySchema(p param) map[string]any {
	var s map[string]any
	switch p.spec.kind {
	case kindString:
		s = map[string]any{"type": "string"}
		if len(p.enum) > 0 {
			s["enum"] = p.enum
		}
	case kindStrings:
		s = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	case kindInt:
		s = map[string]any{"type": "integer", "minimum": 0}
	case kindBool:
		s = map[string]any{"type": "boolean", "default": false}
	case kindEdits:
		s = map[string]any{
			"type": "array",
			"items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"oldText": map[string]any{"type": "string", "description": "Text to search for (exact, or the same lines up to whitespace)."},
					"newText": map[string]any{"type": "string", "description": "Text to replace it with."},
				},
				"required":             []string{"oldText", "newText"},
				"additionalProperties": false,
			},
		}
	}
	if p.desc != "" {
		s["description"] = p.desc
	}
	return s
}
