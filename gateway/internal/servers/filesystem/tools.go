package filesystem

import (
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
)

// Argument roles used by the annotations (the policy engine's registry).
const (
	roleRead   = policy.RoleReadPath
	roleWrite  = policy.RoleWritePath
	roleDelete = policy.RoleDeletePath
	roleNone   = policy.RoleNone
)

func pathParam(name, desc string, roles ...policy.Role) toolargs.Arg {
	return toolargs.Arg{Name: name, Kind: toolargs.String, Required: true, Desc: desc, Roles: policy.Static(roles...)}
}

// opt is an optional argument without a role; a boolean one defaults to
// false in the schema.
func opt(name string, kind toolargs.Kind, desc string) toolargs.Arg {
	a := toolargs.Arg{Name: name, Kind: kind, Desc: desc, Roles: policy.Static(roleNone)}
	if kind == toolargs.Bool {
		a.Default = false
	}
	return a
}

// toolDefs is the tool set of the reference MCP filesystem server, with the
// same names and arguments, and the annotations of the original's
// tool-annotations.json.
var toolDefs = []toolargs.Tool[*Server]{
	{
		Name:    "read_text_file",
		Comment: "Reads the contents of a file as text, optionally only the first or last lines.",
		Desc: "Read the complete contents of a file as text. Use 'head' to read only the first N lines " +
			"or 'tail' for the last N lines (not both). Only works within the sandbox.",
		Args: []toolargs.Arg{
			pathParam("path", "Absolute path of the file.", roleRead),
			opt("head", toolargs.Int, "If set, return only the first N lines."),
			opt("tail", toolargs.Int, "If set, return only the last N lines."),
		},
		Run: (*Server).readTextFile,
	},
	{
		Name:    "read_file",
		Comment: "Deprecated alias of read_text_file.",
		Desc:    "Read the complete contents of a file as text. DEPRECATED: use read_text_file.",
		Args: []toolargs.Arg{
			pathParam("path", "Absolute path of the file.", roleRead),
			opt("head", toolargs.Int, "If set, return only the first N lines."),
			opt("tail", toolargs.Int, "If set, return only the last N lines."),
		},
		Run: (*Server).readTextFile,
	},
	{
		Name:    "read_media_file",
		Comment: "Reads an image or audio file and returns it base64-encoded.",
		Desc:    "Read an image or audio file. Returns the base64-encoded data and MIME type. Only works within the sandbox.",
		Args:    []toolargs.Arg{pathParam("path", "Absolute path of the file.", roleRead)},
		Run:     (*Server).readMediaFile,
	},
	{
		Name:    "read_multiple_files",
		Comment: "Reads several files at once.",
		Desc: "Read the contents of several files at once. Each file's content is returned with its path; " +
			"a failed read does not stop the others. Only works within the sandbox.",
		Args: []toolargs.Arg{{
			Name:     "paths",
			Kind:     toolargs.Strings,
			Required: true,
			Desc:     "Absolute paths of the files to read.",
			Roles:    policy.Static(roleRead),
		}},
		Run: (*Server).readMultipleFiles,
	},
	{
		Name:    "write_file",
		Comment: "Creates a file or overwrites an existing one.",
		Desc: "Create a new file or completely overwrite an existing file with new content. " +
			"Only works within the sandbox.",
		Args: []toolargs.Arg{
			pathParam("path", "Absolute path of the file.", roleWrite),
			{Name: "content", Kind: toolargs.String, Required: true, Desc: "The new content.", Roles: policy.Static(roleNone)},
		},
		Run: (*Server).writeFile,
	},
	{
		Name:    "edit_file",
		Comment: "Edits a text file by replacing text; with dryRun it only reads the file and returns the diff.",
		Desc: "Make line-based edits to a text file. Each edit replaces an exact text (or the same lines up to " +
			"whitespace) with new text. Returns a git-style diff. With dryRun the file is not changed. " +
			"Only works within the sandbox.",
		Args: []toolargs.Arg{
			{
				Name:     "path",
				Kind:     toolargs.String,
				Required: true,
				Desc:     "Absolute path of the file.",
				Roles: policy.ArgSpec{
					Default: []policy.Role{roleRead, roleWrite},
					When: []policy.ConditionalRoles{{
						Condition: policy.ArgCondition{Arg: "dryRun", Equals: true},
						Roles:     []policy.Role{roleRead},
					}},
				},
			},
			editsArg,
			opt("dryRun", toolargs.Bool, "Preview the changes as a diff without writing them."),
		},
		Run: (*Server).editFile,
	},
	{
		Name:    "create_directory",
		Comment: "Creates a directory and any missing parents.",
		Desc: "Create a directory, including missing parents. Succeeds if it already exists. " +
			"Only works within the sandbox.",
		Args: []toolargs.Arg{pathParam("path", "Absolute path of the directory.", roleWrite)},
		Run:  (*Server).createDirectory,
	},
	{
		Name:    "list_directory",
		Comment: "Lists the entries of a directory.",
		Desc:    "List the files and directories in a directory, marked [FILE] or [DIR]. Only works within the sandbox.",
		Args:    []toolargs.Arg{pathParam("path", "Absolute path of the directory.", roleRead)},
		Run:     (*Server).listDirectory,
	},
	{
		Name:    "list_directory_with_sizes",
		Comment: "Lists the entries of a directory with their sizes.",
		Desc: "List the files and directories in a directory with sizes and a summary. " +
			"Only works within the sandbox.",
		Args: []toolargs.Arg{
			pathParam("path", "Absolute path of the directory.", roleRead),
			{Name: "sortBy", Kind: toolargs.String, Desc: "Sort entries by name (default) or size.",
				Enum: []string{"name", "size"}, Roles: policy.Static(roleNone)},
		},
		Run: (*Server).listDirectoryWithSizes,
	},
	{
		Name:    "directory_tree",
		Comment: "Returns the recursive tree of a directory as JSON.",
		Desc: "Get a recursive tree of files and directories as JSON: each entry has 'name', 'type' " +
			"(file/directory) and, for directories, 'children'. Symbolic links are not followed. " +
			"Only works within the sandbox.",
		Args: []toolargs.Arg{
			pathParam("path", "Absolute path of the directory.", roleRead),
			opt("excludePatterns", toolargs.Strings, "Glob patterns (relative to path) to leave out; a plain name is excluded at any depth."),
		},
		Run: (*Server).directoryTree,
	},
	{
		Name:    "move_file",
		Comment: "Moves or renames a file or directory; the source is removed from its old place.",
		Desc: "Move or rename a file or directory. Fails if the destination exists. " +
			"Both paths must be within the sandbox.",
		Args: []toolargs.Arg{
			pathParam("source", "Absolute path to move.", roleRead, roleDelete),
			pathParam("destination", "Absolute new path.", roleWrite),
		},
		Run: (*Server).moveFile,
	},
	{
		Name:    "search_files",
		Comment: "Searches a directory tree for paths matching a glob pattern.",
		Desc: "Recursively search for files and directories whose path relative to 'path' matches a glob " +
			"('*.go' in that directory, '**/*.go' at any depth). Returns full paths. Symbolic links are not " +
			"followed. Only searches within the sandbox.",
		Args: []toolargs.Arg{
			pathParam("path", "Absolute path of the directory to search.", roleRead),
			{Name: "pattern", Kind: toolargs.String, Required: true, Desc: "Glob pattern.", Roles: policy.Static(roleNone)},
			opt("excludePatterns", toolargs.Strings, "Glob patterns to leave out; a plain name is excluded at any depth."),
		},
		Run: (*Server).searchFiles,
	},
	{
		Name:    "get_file_info",
		Comment: "Returns metadata of a file or directory.",
		Desc: "Get metadata of a file or directory: size, times, type and permissions. " +
			"Only works within the sandbox.",
		Args: []toolargs.Arg{pathParam("path", "Absolute path.", roleRead)},
		Run:  (*Server).getFileInfo,
	},
	{
		Name:    "list_allowed_directories",
		Comment: "Names the directory the server may access.",
		Desc:    "List the directories this server may access (the sandbox); everything beneath them is accessible.",
		Run:     (*Server).listAllowedDirectories,
	},
}
