package filesystem

import "strings"

// errCodeFile is the refusal of a write to a file that makes git or a
// shell run code.
var errCodeFile = &toolError{msg: "access denied: writing git metadata or environment files (.git, .gitmodules, .gitattributes, .env, .envrc) is forbidden"}

// codeFile reports whether the sandbox-relative slash path rel names
// something that makes git or a shell run code when written: anything
// under a .git directory, .gitmodules, .gitattributes, .envrc or .env.
// Components compare case-insensitively after removing what some file
// systems ignore (trailing dots and spaces, an NTFS stream suffix), and the
// 8.3 short names GIT~1, GITMOD~1 and GITATT~1 count as the long ones.
//
// The policy engine refuses these writes first (its protected-path
// invariant); this is the server's own check, in case a call reaches it
// some other way.
func codeFile(rel string) bool {
	for _, comp := range strings.Split(rel, "/") {
		switch normComponent(comp) {
		case ".git", ".gitmodules", ".gitattributes", ".envrc", ".env":
			return true
		}
	}
	return false
}

func normComponent(c string) string {
	if i := strings.Index(c, "::"); i >= 0 {
		c = c[:i]
	}
	c = strings.ToLower(strings.TrimRight(c, ". "))
	if i := strings.IndexByte(c, '~'); i > 0 && i+1 < len(c) && digits(c[i+1:]) {
		switch c[:i] {
		case "git":
			return ".git"
		case "gitmod":
			return ".gitmodules"
		case "gitatt":
			return ".gitattributes"
		}
	}
	return c
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
