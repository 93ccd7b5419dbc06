package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrExecutableConfig is returned by RefuseExecutableConfig when the
// repository's config would make git run a program.
var ErrExecutableConfig = errors.New("repository config defines executable settings")

// Entry is one configuration value as `git config --list` reports it:
// section and variable names lower-cased, the subsection kept as written.
type Entry struct {
	Scope string // "local", "worktree", "command", ...
	Key   string // e.g. "filter.lfs.clean"
	Value string
	// NoValue is set for a key written without "=" (an implicit true).
	NoValue bool
}

// Finding is a setting that makes git run a program or read another file.
// It carries no value: values may hold credentials.
type Finding struct {
	Scope  string
	Key    string
	Reason string
}

func (f Finding) String() string { return f.Key + " (" + f.Reason + ")" }

// ListConfig returns the repository's own configuration (local and worktree
// scopes; system and global are off) without following include directives,
// as git itself parses it. The hardened -c settings appear with scope
// "command".
func ListConfig(ctx context.Context, o Options) ([]Entry, error) {
	res, err := Run(ctx, o, "config", "--list", "-z", "--show-scope", "--no-includes")
	if err != nil {
		var ge *Error
		// Exit status 1 with no output: the config is empty.
		if errors.As(err, &ge) && ge.ExitCode == 1 && len(res.Stdout) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("listing repository config: %w", err)
	}
	entries, err := ParseConfigList(res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("listing repository config: %w", err)
	}
	return entries, nil
}

// ParseConfigList parses the output of `git config --list -z --show-scope`:
// records "scope NUL key LF value NUL" (no LF and no value for a key written
// without "=").
func ParseConfigList(out []byte) ([]Entry, error) {
	var entries []Entry
	for len(out) > 0 {
		i := bytes.IndexByte(out, 0)
		if i < 0 {
			return nil, errors.New("parsing config list: truncated scope")
		}
		scope := string(out[:i])
		out = out[i+1:]
		j := bytes.IndexByte(out, 0)
		if j < 0 {
			return nil, errors.New("parsing config list: truncated entry")
		}
		rec := out[:j]
		out = out[j+1:]
		e := Entry{Scope: scope}
		if k := bytes.IndexByte(rec, '\n'); k >= 0 {
			e.Key, e.Value = string(rec[:k]), string(rec[k+1:])
		} else {
			e.Key, e.NoValue = string(rec), true
		}
		if e.Key == "" || scope == "" {
			return nil, errors.New("parsing config list: empty key or scope")
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// ScanConfig lists the repository's config and reports every executable
// setting in it. Command-line settings (the hardening) are not reported.
func ScanConfig(ctx context.Context, o Options) ([]Finding, error) {
	entries, err := ListConfig(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("scanning repository config: %w", err)
	}
	return CheckConfig(entries), nil
}

// RefuseExecutableConfig returns an error wrapping ErrExecutableConfig that
// names the offending keys when ScanConfig finds any; any failure to scan is
// also an error (callers deny).
func RefuseExecutableConfig(ctx context.Context, o Options) error {
	findings, err := ScanConfig(ctx, o)
	if err != nil {
		return err
	}
	if len(findings) == 0 {
		return nil
	}
	keys := make([]string, 0, len(findings))
	for _, f := range findings {
		keys = append(keys, f.Key)
	}
	return fmt.Errorf("%w: %s", ErrExecutableConfig, strings.Join(keys, ", "))
}

// CheckConfig reports the entries that make git run a program, read another
// config file or reach a transport other than https and ssh. Entries of
// scope "command" are skipped. The result is sorted by key.
func CheckConfig(entries []Entry) []Finding {
	var out []Finding
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Scope == "command" {
			continue
		}
		reason := classify(e)
		if reason == "" || seen[e.Scope+"\x00"+e.Key] {
			continue
		}
		seen[e.Scope+"\x00"+e.Key] = true
		out = append(out, Finding{Scope: e.Scope, Key: e.Key, Reason: reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// splitKey splits "section.sub.section.name" into lower-cased section, the
// subsection as written and the lower-cased variable name.
func splitKey(key string) (section, sub, name string, hasSub bool) {
	first := strings.IndexByte(key, '.')
	last := strings.LastIndexByte(key, '.')
	if first < 0 {
		return strings.ToLower(key), "", "", false
	}
	section, name = strings.ToLower(key[:first]), strings.ToLower(key[last+1:])
	if last > first {
		return section, key[first+1 : last], name, true
	}
	return section, "", name, false
}

// classify returns why e is dangerous, or "".
func classify(e Entry) string {
	section, sub, name, hasSub := splitKey(e.Key)
	switch section {
	case "core":
		switch name {
		case "fsmonitor":
			if !isFalse(e) {
				return "runs an fsmonitor program"
			}
		case "sshcommand":
			return "replaces the ssh command"
		case "editor":
			return "runs an editor"
		case "pager":
			return "runs a pager"
		case "askpass":
			return "runs an askpass program"
		case "gitproxy":
			return "runs a proxy command"
		case "alternaterefscommand":
			return "runs a command for alternate refs"
		}
	case "sequence":
		if name == "editor" {
			return "runs an editor"
		}
	case "pager":
		return "runs a pager"
	case "interactive":
		if name == "difffilter" {
			return "runs a diff filter"
		}
	case "diff":
		if name == "external" || (hasSub && (name == "command" || name == "textconv")) {
			return "runs a diff driver"
		}
	case "merge":
		if hasSub && name == "driver" {
			return "runs a merge driver"
		}
	case "mergetool", "difftool":
		if hasSub && (name == "cmd" || name == "path") {
			return "runs a diff or merge tool"
		}
	case "filter":
		return "defines a filter driver"
	case "credential":
		if name == "helper" {
			return "runs a credential helper"
		}
	case "include":
		if name == "path" {
			return "includes another config file"
		}
	case "includeif":
		if name == "path" {
			return "includes another config file"
		}
	case "uploadpack":
		return "changes how upload-pack runs"
	case "remote":
		switch name {
		case "uploadpack", "receivepack":
			return "runs a custom pack program"
		case "vcs":
			return "runs a remote helper"
		}
	case "url":
		if name == "insteadof" || name == "pushinsteadof" {
			if !networkURLBase(sub) {
				return "rewrites URLs to a transport other than https or ssh"
			}
		}
	case "protocol":
		if name == "allow" {
			return "changes which transports are allowed"
		}
	case "gpg":
		if name == "program" || name == "defaultkeycommand" {
			return "runs a signing program"
		}
	case "alias":
		if strings.HasPrefix(strings.TrimSpace(e.Value), "!") {
			return "defines a shell alias"
		}
	case "submodule":
		if name == "update" && strings.HasPrefix(strings.TrimSpace(e.Value), "!") {
			return "runs a submodule update command"
		}
	case "trailer":
		if name == "command" || name == "cmd" {
			return "runs a trailer command"
		}
	case "man", "browser":
		if name == "cmd" || name == "path" {
			return "runs a viewer"
		}
	case "web":
		if name == "browser" {
			return "runs a browser"
		}
	case "sendemail":
		if name == "smtpserver" || name == "tocmd" || name == "cccmd" || name == "headercmd" {
			return "runs a mail command"
		}
	}
	return ""
}

func isFalse(e Entry) bool {
	if e.NoValue {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(e.Value)) {
	case "false", "no", "off", "0", "":
		return true
	}
	return false
}

// networkURLBase reports whether a url.<base>.insteadOf target is an https
// or ssh URL (scp-style user@host: included).
func networkURLBase(base string) bool {
	l := strings.ToLower(base)
	if strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "ssh://") {
		return true
	}
	if strings.Contains(l, "::") || strings.Contains(l, "://") || strings.HasPrefix(l, "-") {
		return false
	}
	at := strings.IndexByte(l, '@')
	colon := strings.IndexByte(l, ':')
	slash := strings.IndexByte(l, '/')
	return at > 0 && colon > at+1 && (slash < 0 || slash > colon)
}
