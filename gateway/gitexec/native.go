package gitexec

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
)

// Limits on the other repository files NativeConfig reads.
const (
	maxHeadFile       = 255 // git's validate_headref reads at most this much
	maxLooseRef       = 256
	maxPackedRefsSize = 4 << 20
)

// NativeConfig reads, without running git, what
//
//	git config --list -z --show-scope --no-includes
//
// prints for the repository r under the hardened environment of Options o:
// the "local" entries of the common directory's config, the "worktree"
// entries of the git directory's config.worktree when the repository format
// enables extensions.worktreeConfig, and the "command" entries of the
// hardening -c flags (HardenedConfig, safe.directory and o.Config).
//
// A nil error also promises that `git remote get-url` in r would not fail
// because of the configuration or the repository's layout, so that
// RemoteURLs may stand in for it: HEAD is one git accepts, the objects and
// refs directories are there, the branch HEAD names is a plain loose ref or
// the packed-refs file is well formed, the repository format is version 0
// or 1 with no extension but worktreeConfig, and every setting git
// validates on the way (core.bare, core.worktree, branch.*, url.*,
// remote.*, transfer.credentialsInUrl) holds a value git accepts.
//
// Whenever that cannot be promised the error wraps ErrUnsure: callers fall
// back to running git. NativeConfig never follows a symbolic link and reads
// only regular files (see ParseConfigFile for the syntax it accepts).
func NativeConfig(r Repo, o Options) ([]Entry, error) {
	if r.GitDir == "" || r.CommonDir == "" {
		return nil, unsure("the repository has no git directory")
	}
	o.GitDir = r.GitDir
	o.WorkTree = r.WorkTree
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	if err := checkRepoLayout(r); err != nil {
		return nil, err
	}
	entries, err := readConfigFile(filepath.Join(r.CommonDir, "config"), "local")
	if err != nil {
		return nil, err
	}
	worktreeConfig, err := repositoryFormat(entries)
	if err != nil {
		return nil, err
	}
	if worktreeConfig {
		wt, err := readConfigFile(filepath.Join(r.GitDir, "config.worktree"), "worktree")
		if err != nil {
			return nil, err
		}
		entries = append(entries, wt...)
	}
	if err := checkSettings(entries); err != nil {
		return nil, err
	}
	return appendCommandEntries(entries, o)
}

// readConfigFile reads and parses one config file; a missing one is empty.
func readConfigFile(path, scope string) ([]Entry, error) {
	data, ok, err := readRegular(path, MaxNativeConfigSize)
	if err != nil || !ok {
		return nil, err
	}
	entries, err := ParseConfigFile(data, scope)
	if err != nil {
		return nil, fmt.Errorf("reading %s config: %w", scope, err)
	}
	return entries, nil
}

// repositoryFormat applies git's repository format check (setup.c:
// check_repo_format, verify_repository_format) to the common config and
// reports whether config.worktree is read. git honours
// extensions.worktreeConfig only when core.repositoryformatversion is set.
func repositoryFormat(local []Entry) (worktreeConfig bool, err error) {
	version := false
	for _, e := range local {
		switch {
		case e.Key == "core.repositoryformatversion":
			if e.NoValue || (e.Value != "0" && e.Value != "1") {
				return false, unsure("core.repositoryformatversion is not 0 or 1")
			}
			version = true
		case strings.HasPrefix(e.Key, "extensions."):
			if e.Key != "extensions.worktreeconfig" {
				return false, unsure("repository extension %s", e.Key)
			}
			b, ok := cleanBool(e)
			if !ok {
				return false, unsure("extensions.worktreeConfig is not a plain boolean")
			}
			worktreeConfig = b
		}
	}
	return version && worktreeConfig, nil
}

// cleanBool parses the booleans every git version reads alike.
func cleanBool(e Entry) (bool, bool) {
	if e.NoValue {
		return true, true
	}
	switch strings.ToLower(e.Value) {
	case "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0", "":
		return false, true
	}
	return false, false
}

// checkSettings refuses to be sure about settings git validates while it
// sets up the repository or reads remotes, unless their values are ones git
// certainly accepts (git dies on the others).
func checkSettings(entries []Entry) error {
	for _, e := range entries {
		if e.Scope == "command" {
			continue
		}
		if err := checkSetting(e); err != nil {
			return err
		}
	}
	return nil
}

func checkSetting(e Entry) error {
	first, last := strings.IndexByte(e.Key, '.'), strings.LastIndexByte(e.Key, '.')
	if first <= 0 || last == len(e.Key)-1 {
		return unsure("malformed key %q", e.Key)
	}
	section, name := e.Key[:first], e.Key[last+1:]
	hasSub := last > first
	sub := ""
	if hasSub {
		sub = e.Key[first+1 : last]
	}
	needValue := func() error {
		if e.NoValue {
			return unsure("%s has no value", e.Key)
		}
		return nil
	}
	switch section {
	case "core":
		switch {
		case hasSub:
		case name == "bare":
			if _, ok := cleanBool(e); !ok {
				return unsure("core.bare is not a plain boolean")
			}
		case name == "worktree":
			return needValue()
		}
	case "transfer":
		if !hasSub && name == "credentialsinurl" {
			return unsure("transfer.credentialsInUrl is set")
		}
	case "branch":
		if !hasSub {
			return nil
		}
		if sub == "" {
			return unsure("branch section with an empty name")
		}
		switch name {
		case "remote", "pushremote", "merge":
			return needValue()
		}
	case "url":
		if hasSub && (name == "insteadof" || name == "pushinsteadof") {
			return needValue()
		}
	case "remote":
		return checkRemoteSetting(e, sub, name, hasSub)
	}
	return nil
}

func checkRemoteSetting(e Entry, sub, name string, hasSub bool) error {
	if !hasSub {
		if name == "pushdefault" && e.NoValue {
			return unsure("remote.pushDefault has no value")
		}
		return nil
	}
	if sub == "" {
		return unsure("remote section with an empty name")
	}
	switch name {
	case "mirror", "skipdefaultupdate", "skipfetchall", "prune", "prunetags":
		if _, ok := cleanBool(e); !ok {
			return unsure("%s is not a plain boolean", e.Key)
		}
	case "url", "pushurl", "receivepack", "uploadpack", "proxy", "proxyauthmethod", "vcs", "tagopt":
		if e.NoValue {
			return unsure("%s has no value", e.Key)
		}
	case "fetch", "push":
		if e.NoValue || !simpleRefspec(e.Value) {
			return unsure("%s is not a refspec this reader knows git accepts", e.Key)
		}
	}
	return nil
}

// simpleRefspec accepts the refspecs git accepts for both fetch and push
// that this reader is certain about: an optional '+', then "src:dst" or
// "src" of plain ref names, a '*' only as a whole component and then on
// both sides.
func simpleRefspec(s string) bool {
	s = strings.TrimPrefix(s, "+")
	src, dst, hasDst := strings.Cut(s, ":")
	if !simpleRefName(src, true) {
		return false
	}
	if !hasDst {
		return !strings.Contains(src, "*")
	}
	return simpleRefName(dst, true) && strings.Count(src, "*") == strings.Count(dst, "*")
}

// simpleRefName accepts '/'-separated components of letters, digits, '-',
// '_' and '.' (not leading, not trailing, no "..", no ".lock" suffix, no
// leading '-'); with star, one component may be exactly '*'.
func simpleRefName(s string, star bool) bool {
	if s == "" || len(s) > 1024 {
		return false
	}
	stars := 0
	for _, comp := range strings.Split(s, "/") {
		if comp == "*" && star {
			stars++
			continue
		}
		if comp == "" || comp[0] == '.' || comp[0] == '-' || comp[len(comp)-1] == '.' ||
			strings.Contains(comp, "..") || strings.HasSuffix(comp, ".lock") {
			return false
		}
		for i := 0; i < len(comp); i++ {
			c := comp[i]
			if !(isKeyChar(c) || c == '_' || c == '.') {
				return false
			}
		}
	}
	return stars <= 1
}

// checkRepoLayout checks what git's repository discovery and remote
// reading look at besides the config: git treats GIT_DIR as a repository
// only when HEAD is valid and the objects and refs directories are
// searchable (otherwise `git config --list` would list no local config);
// reading remotes resolves HEAD, which dies on a malformed packed-refs.
func checkRepoLayout(r Repo) error {
	head, ok, err := readRegular(filepath.Join(r.GitDir, "HEAD"), maxHeadFile)
	if err != nil {
		return err
	}
	if !ok {
		return unsure("HEAD is missing")
	}
	for _, d := range []string{"objects", "refs"} {
		if !searchable(filepath.Join(r.CommonDir, d)) {
			return unsure("%s is not a searchable directory", d)
		}
	}
	head = bytes.TrimRight(head, " \t\n\r")
	if isLowerHex(head, 40) {
		return nil // detached
	}
	target, ok := bytes.CutPrefix(head, []byte("ref:"))
	if !ok {
		return unsure("HEAD is neither a branch nor an object id")
	}
	branch, ok := bytes.CutPrefix(bytes.TrimLeft(target, " \t\n\r"), []byte("refs/heads/"))
	if !ok || !simpleRefName(string(branch), false) {
		return unsure("HEAD does not name a plain branch")
	}
	loose, ok, err := readRegular(filepath.Join(r.CommonDir, "refs", "heads", filepath.FromSlash(string(branch))), maxLooseRef)
	if err != nil {
		return err
	}
	if ok {
		if bytes.HasPrefix(loose, []byte("ref:")) {
			return unsure("the current branch is a symbolic ref")
		}
		return nil
	}
	packed, ok, err := readRegular(filepath.Join(r.CommonDir, "packed-refs"), maxPackedRefsSize)
	if err != nil || !ok {
		return err
	}
	return checkPackedRefs(packed)
}

// checkPackedRefs accepts a packed-refs file only when every line is one
// git reads without complaint: an optional "# pack-refs with:" header,
// "<40 hex> <refname>" records, each optionally followed by one
// "^<40 hex>" peeled line.
func checkPackedRefs(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != '\n' {
		return unsure("packed-refs does not end with a line feed")
	}
	lines := bytes.Split(b[:len(b)-1], []byte{'\n'})
	prevRecord := false
	for i, l := range lines {
		switch {
		case i == 0 && bytes.HasPrefix(l, []byte("# pack-refs with:")):
			if bytes.IndexFunc(l, func(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 }) >= 0 {
				return unsure("odd bytes in the packed-refs header")
			}
			prevRecord = false
			continue
		case len(l) > 0 && l[0] == '^':
			if !prevRecord || !isLowerHex(l[1:], 40) {
				return unsure("malformed peeled line in packed-refs")
			}
			prevRecord = false
			continue
		}
		if len(l) < 42 || !isLowerHex(l[:40], 40) || l[40] != ' ' {
			return unsure("malformed packed-refs record")
		}
		for _, c := range l[41:] {
			if c <= 0x20 || c >= 0x7f {
				return unsure("odd bytes in a packed-refs record")
			}
		}
		prevRecord = true
	}
	return nil
}

func isLowerHex(b []byte, n int) bool {
	if len(b) != n {
		return false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// appendCommandEntries appends the "command" scope entries git lists for
// the -c flags of o (see argv): key with section and variable name
// lower-cased, value after the first '='.
func appendCommandEntries(entries []Entry, o Options) ([]Entry, error) {
	add := func(kv string) error {
		k, v, _ := strings.Cut(kv, "=")
		key, ok := canonicalCommandKey(k)
		if !ok {
			return unsure("command-line setting %q", k)
		}
		entries = append(entries, Entry{Scope: "command", Key: key, Value: v})
		return nil
	}
	for _, kv := range hardenedConfig {
		if err := add(kv); err != nil {
			return nil, err
		}
	}
	if err := add("safe.directory=" + o.SafeDirectory); err != nil {
		return nil, err
	}
	for _, kv := range o.Config {
		if err := add(kv); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// canonicalCommandKey is git_config_parse_key for the keys this reader is
// sure about: letters, digits and '-' in the section and variable name
// (lower-cased), a subsection without control characters kept as written.
func canonicalCommandKey(k string) (string, bool) {
	first, last := strings.IndexByte(k, '.'), strings.LastIndexByte(k, '.')
	if first <= 0 || last == len(k)-1 || !isAlpha(k[last+1]) {
		return "", false
	}
	section, sub, name := k[:first], "", k[last+1:]
	if last > first {
		sub = k[first+1 : last]
	}
	for _, s := range []string{section, name} {
		for i := 0; i < len(s); i++ {
			if !isKeyChar(s[i]) {
				return "", false
			}
		}
	}
	for i := 0; i < len(sub); i++ {
		if sub[i] < 0x20 || sub[i] == 0x7f {
			return "", false
		}
	}
	key := strings.ToLower(section)
	if last > first {
		key += "." + sub
	}
	return key + "." + strings.ToLower(name), true
}

// readRegular is ReadRegularFile for the native reader: every failure
// makes it unsure.
func readRegular(path string, max int64) ([]byte, bool, error) {
	data, ok, err := ReadRegularFile(path, max)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrUnsure, err)
	}
	return data, ok, nil
}

// baseName names a file in an error without the host path leading to it.
func baseName(p string) string { return filepath.Base(p) }
