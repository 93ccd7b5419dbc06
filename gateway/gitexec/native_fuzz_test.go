package gitexec

import (
	"testing"
)

// fuzzFragments are the config fragments the bytes 0x80-0xff of a fuzz
// input stand for, so that mutations keep producing text that git accepts
// and that reaches remote resolution (headers, keys, URLs, rewrites,
// escapes, quoting, comments, CR LF, a byte order mark, UTF-8).
var fuzzFragments = []string{
	"[remote \"origin\"]\n", "[remote \"up\"]\n", "[remote \"", "\"]", "[remote.Origin]\n", "[Remote \"a.b\"]\n",
	"[url \"https://a.example/\"]\n", "[url \"git@b.example:\"]\n", "[url \"", "[url \"https://github.com/\"]\n",
	"[core]\n", "[extensions]\n", "[branch \"main\"]\n", "[remote]\n", "[x \"\"]\n", "[x]\n",
	"\turl = ", "\tpushurl = ", "\tinsteadOf = ", "\tpushInsteadOf = ", "\tURL=", "\tPushUrl =",
	"\tfetch = +refs/heads/*:refs/remotes/origin/*\n", "\tpush = refs/heads/main:refs/heads/x\n", "\tmirror", "\tmirror = false\n",
	"\trepositoryformatversion = 1\n", "\trepositoryformatversion = 0\n", "\tworktreeConfig = true\n", "\tworktreeConfig\n",
	"\tbare = false\n", "\tremote = origin\n", "\tpushRemote = up\n", "\tpushDefault = up\n", "\tmerge = refs/heads/main\n",
	"https://github.com/a/b", "git@github.com:a/b.git", "ssh://git@github.com/a/b", "gh:", "x:", "https://", "origin", "up",
	"\\\n", "\\\"", "\\\\", "\\t", "\\n", "\\b", "\"", "\"\"", " # c", " ; c", "#", ";",
	"\r\n", "\xEF\xBB\xBF", "é", "ü", "=", " = ", " ", "\t", "\n", ".", "[", "]", "a-1", "Key",
}

// expandFuzzText turns a fuzz input into config text: bytes below 0x80
// are themselves, every other byte is a fragment of fuzzFragments.
func expandFuzzText(in []byte) []byte {
	out := make([]byte, 0, 2*len(in))
	for _, c := range in {
		if c < 0x80 {
			out = append(out, c)
			continue
		}
		out = append(out, fuzzFragments[int(c-0x80)%len(fuzzFragments)]...)
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// FuzzNativeConfig generates config text (the repository's config and its
// config.worktree, see expandFuzzText), reads it natively and, whenever the
// native reader is sure, compares with real git: `git config --list -z
// --show-scope --no-includes` must list the same entries and `git remote
// get-url --all [--push]` must print the same URLs for origin, an unknown
// name and the remotes the config names. Any disagreement fails. Git runs a
// few times per sure input, so this fuzzer is slow; run it for a minute or
// more.
func FuzzNativeConfig(f *testing.F) {
	for _, c := range diffCases {
		if c.sure && c.setup == nil && isASCII(c.config) && isASCII(c.worktree) {
			f.Add([]byte(c.config), []byte(c.worktree))
		}
	}
	f.Add([]byte{0x80, 0x90, 0xa3, '\n', 0x86, 0x92, 0xa6, '\n'}, []byte{})
	r := initRepo(f)
	f.Fuzz(func(t *testing.T, local, worktree []byte) {
		if len(local) > 2048 || len(worktree) > 2048 {
			return // small inputs explore the syntax; size limits have their own tests
		}
		writeConfigs(t, r, expandFuzzText(local), expandFuzzText(worktree))
		differential(t, r, 2)
	})
}
