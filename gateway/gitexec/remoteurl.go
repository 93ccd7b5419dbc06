package gitexec

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoSuchRemote is returned by RemoteURLs for a name that the
// repository's own config does not define (git remote get-url exits 2).
var ErrNoSuchRemote = errors.New("no such remote")

// RemoteURLs computes from config entries (as ListConfig or NativeConfig
// return them) what
//
//	git remote get-url --all [--push] -- name
//
// prints, one URL per element, following git 2.39's remote.c:
//
//   - a remote exists for get-url only when the local or worktree config
//     has some remote.<name>.* setting; otherwise ErrNoSuchRemote;
//   - remote.<name>.url values are rewritten by the longest matching
//     url.<base>.insteadOf prefix (on equal lengths, the base that appeared
//     first wins);
//   - remote.<name>.pushurl values are rewritten by insteadOf too (never by
//     pushInsteadOf);
//   - when the remote has no pushurl, each url that a pushInsteadOf prefix
//     matches contributes the pushInsteadOf rewrite of the original url as
//     a push URL (a url no pushInsteadOf matches contributes nothing);
//   - a remote that exists but has no url is its own URL (the name,
//     rewritten the same way), as git reads an unknown remote as a path;
//   - with push, the push URLs if there are any, else the URLs.
//
// Entries whose values git would refuse while reading remotes give an
// error wrapping ErrUnsure. Legacy .git/remotes and .git/branches files
// are not consulted: callers refuse repositories that have one.
func RemoteURLs(entries []Entry, name string, push bool) ([]string, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("resolving remote URLs: %w: %q is not a remote name", ErrBadOption, name)
	}
	var insteadOf, pushInsteadOf rewrites
	var urls, pushURLs []string
	configured, vcs := false, false
	for _, e := range entries {
		if err := checkSetting(e); err != nil {
			return nil, fmt.Errorf("resolving remote URLs: %w", err)
		}
		first, last := strings.IndexByte(e.Key, '.'), strings.LastIndexByte(e.Key, '.')
		if last <= first {
			continue // no subsection
		}
		section, sub, key := e.Key[:first], e.Key[first+1:last], e.Key[last+1:]
		switch section {
		case "url":
			switch key {
			case "insteadof":
				insteadOf.add(sub, e.Value)
			case "pushinsteadof":
				pushInsteadOf.add(sub, e.Value)
			}
		case "remote":
			if sub != name {
				continue
			}
			if e.Scope == "local" || e.Scope == "worktree" {
				configured = true
			}
			switch key {
			case "url":
				urls = append(urls, e.Value)
			case "pushurl":
				pushURLs = append(pushURLs, e.Value)
			case "vcs":
				vcs = true
			}
		}
	}
	if !configured {
		return nil, fmt.Errorf("resolving remote URLs: %w %q", ErrNoSuchRemote, name)
	}
	// remote.c: alias_all_urls, after every file was read.
	for i, u := range pushURLs {
		pushURLs[i], _ = insteadOf.alias(u)
	}
	addPushAliases := len(pushURLs) == 0
	for i, u := range urls {
		if addPushAliases {
			if p, ok := pushInsteadOf.alias(u); ok {
				pushURLs = append(pushURLs, p)
			}
		}
		urls[i], _ = insteadOf.alias(u)
	}
	// remote.c: remotes_remote_get_1 for a named remote without a URL.
	if len(urls) == 0 && !vcs {
		u, _ := insteadOf.alias(name)
		urls = append(urls, u)
		if p, ok := pushInsteadOf.alias(name); ok {
			pushURLs = append(pushURLs, p)
		}
	}
	out := urls
	if push && len(pushURLs) > 0 {
		out = pushURLs
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolving remote URLs: no URLs configured for remote %q", name)
	}
	return out, nil
}

// rewrites are url.<base>.insteadOf (or pushInsteadOf) values grouped by
// base in the order the bases first appear (remote.c: make_rewrite).
type rewrites []rewrite

type rewrite struct {
	base     string
	prefixes []string
}

func (r *rewrites) add(base, prefix string) {
	for i := range *r {
		if (*r)[i].base == base {
			(*r)[i].prefixes = append((*r)[i].prefixes, prefix)
			return
		}
	}
	*r = append(*r, rewrite{base: base, prefixes: []string{prefix}})
}

// alias is remote.c's alias_url: the longest matching prefix wins, the
// first one on a tie; ok reports whether any matched (even when the result
// equals url).
func (r rewrites) alias(url string) (string, bool) {
	best, bestLen := -1, -1
	for i, rw := range r {
		for _, p := range rw.prefixes {
			if len(p) > bestLen && strings.HasPrefix(url, p) {
				best, bestLen = i, len(p)
			}
		}
	}
	if best < 0 {
		return url, false
	}
	return r[best].base + url[bestLen:], true
}
