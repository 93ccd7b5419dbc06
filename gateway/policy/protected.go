package policy

// IsProtectedRepoPath reports whether a slash-separated path, absolute or
// relative, names something that makes git or a shell run code when it is
// written: anything under a .git directory, .gitmodules, .gitattributes,
// .envrc or .env, in any spelling a file system may treat as the same name
// (case, NFKC compatibility forms such as fullwidth letters, trailing dots
// and spaces, an NTFS stream suffix, the 8.3 short names GIT~1, GITMOD~1,
// GITATT~1, ENV~1 and ENVRC~1).
//
// It is the rule of the protected-path invariant, exported so that a tool
// server that refuses such writes itself applies exactly the same rule.
func IsProtectedRepoPath(p string) bool { return isProtectedRepoFile(p) }
