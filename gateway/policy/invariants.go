package policy

import "strings"

// checkProtected denies any path value inside a protected path (unless the
// protected path contains the sandbox and the value lies in the sandbox),
// and writes or deletes of git metadata and environment files.
func (c *call) checkProtected() (Evaluation, bool) {
	if !c.rr.anyPath {
		return Evaluation{}, false
	}
	sb := c.e.canon.sandbox
	for i := range c.vals {
		if c.rr.kind[i]&argPath == 0 {
			continue
		}
		writes := false
		for _, r := range roleList {
			if r.destructivePathWrite && c.rr.perArg[i].has(r.Role) {
				writes = true
			}
		}
		for _, p := range c.vals[i].canon {
			for _, pp := range c.e.protect {
				if within(p, pp) && !(sb != "" && within(sb, pp) && within(p, sb)) {
					return c.deny(RuleProtectedPath, reasonProtectedPath, "protected path: "+p)
				}
			}
			if writes && isProtectedRepoFile(p) {
				return c.deny(RuleProtectedPath, reasonProtectedInRepo, "protected file: "+p)
			}
		}
	}
	return Evaluation{}, false
}

// isProtectedRepoFile reports whether a path names something that makes git
// or a shell run code: anything under a .git directory, .gitmodules,
// .gitattributes, .envrc and .env. Components are compared after NFKC
// normalisation and case folding, with what Windows file systems ignore
// removed (trailing dots and spaces, an NTFS stream suffix), and 8.3 short
// names (GIT~1, GITMOD~1, GITATT~1, ENV~1, ENVRC~1) count as the long ones
// (protectedName).
func isProtectedRepoFile(p string) bool {
	for p != "" {
		var comp string
		if i := strings.IndexByte(p, '/'); i >= 0 {
			comp, p = p[:i], p[i+1:]
		} else {
			comp, p = p, ""
		}
		if comp == "" {
			continue
		}
		switch normComponent(comp) {
		case ".git", ".gitmodules", ".gitattributes", ".envrc", ".env":
			return true
		}
	}
	return false
}

// normComponent is protectedName (spelling.go): NFKC, case folding, NTFS
// stream suffixes, trailing dots and spaces, 8.3 short names.
func normComponent(c string) string { return protectedName(c) }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isPRMerge reports whether a tool name says it merges a pull or merge
// request (merge_pull_request, pr_merge, mergePullRequest, accept_merge_request,
// enable_pr_auto_merge, ...), on any server.
func isPRMerge(tool string) bool {
	words := splitWords(tool)
	merge, pr := false, false
	for i, w := range words {
		switch w {
		case "merge", "merges", "merged", "automerge":
			merge = true
			if i+1 < len(words) && words[i+1] == "request" {
				pr = true
			}
		case "pr", "prs", "pull", "pulls", "mr", "mrs":
			pr = true
		}
	}
	return merge && pr
}

// splitWords splits snake_case, kebab-case, dotted and camelCase names into
// lower-case words.
func splitWords(s string) []string {
	var words []string
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'A' && ch <= 'Z':
			prevLower := i > 0 && (s[i-1] >= 'a' && s[i-1] <= 'z' || s[i-1] >= '0' && s[i-1] <= '9')
			acronymEnd := i > 0 && s[i-1] >= 'A' && s[i-1] <= 'Z' && i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z'
			if prevLower || acronymEnd {
				flush()
			}
			cur = append(cur, ch+'a'-'A')
		case ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9':
			cur = append(cur, ch)
		default:
			flush()
		}
	}
	flush()
	return words
}
