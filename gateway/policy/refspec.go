package policy

import (
	"errors"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/gitref"
)

// PushRefspec is one push destination in canonical form.
type PushRefspec struct {
	Raw      string
	Force    bool   // a leading '+'
	Src      string // source as given ("" for a deletion); HEAD resolved to the current branch ref
	Dst      string // full destination ref: refs/heads/... or refs/tags/...
	Delete   bool   // ":dst" (empty source)
	Wildcard bool   // src and dst carry one '*'
	// Candidates are every ref git might update for Dst when it matches a
	// short destination against the remote's refs (DWIM): the protected
	// branch check looks at all of them.
	Candidates []string
}

// ErrRefspec is wrapped by every refspec refusal.
var ErrRefspec = errors.New("refused refspec")

func refspecErr(raw, format string, a ...any) error {
	return fmt.Errorf("%w %s: %s", ErrRefspec, gitref.Quote(raw), fmt.Sprintf(format, a...))
}

// ParsePushRefspec parses one push refspec "[+]src[:dst]" the way git push
// reads it and returns its canonical destination. current is the current
// branch's short name ("" when unknown or detached): it is needed when the
// source is HEAD and no destination is given.
//
// Refused outright (an error wrapping ErrRefspec): non-ASCII, whitespace or
// control characters, a leading '-' or '^', more than one ':', the matching
// refspec ":", an invalid ref name, a destination outside refs/heads/ and
// refs/tags/, a wildcard on one side only, and a source without a
// destination that is not a ref. Force ('+') and deletion (":dst") parse
// successfully; CheckPush refuses them.
func ParsePushRefspec(spec, current string) (PushRefspec, error) {
	r := PushRefspec{Raw: spec}
	if spec == "" {
		return r, refspecErr(spec, "empty")
	}
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		if c >= 0x80 {
			return r, refspecErr(spec, "non-ASCII ref names are not allowed")
		}
		if c <= 0x20 || c == 0x7f {
			return r, refspecErr(spec, "contains a space or control character")
		}
	}
	s := spec
	if strings.HasPrefix(s, "+") {
		r.Force = true
		s = s[1:]
	}
	if strings.HasPrefix(s, "-") {
		return r, refspecErr(spec, "starts with '-'")
	}
	if strings.HasPrefix(s, "^") {
		return r, refspecErr(spec, "negative refspecs are not allowed")
	}
	if strings.Count(s, ":") > 1 {
		return r, refspecErr(spec, "more than one ':'")
	}
	src, dst, hasDst := strings.Cut(s, ":")
	if hasDst && src == "" && dst == "" {
		return r, refspecErr(spec, "the matching refspec ':' pushes every branch")
	}
	if strings.HasPrefix(dst, "-") {
		return r, refspecErr(spec, "destination starts with '-'")
	}
	srcStar, dstStar := strings.Count(src, "*"), strings.Count(dst, "*")
	if srcStar > 1 || dstStar > 1 || (hasDst && src != "" && srcStar != dstStar) {
		return r, refspecErr(spec, "a wildcard must appear once on both sides")
	}
	r.Wildcard = srcStar == 1
	if src == "" {
		r.Delete = true
	} else {
		full, err := canonicalSource(src, current)
		if err != nil {
			return r, refspecErr(spec, "%s", err)
		}
		r.Src = full
	}
	switch {
	case hasDst:
		d, cands, err := canonicalDestination(dst, r.Src)
		if err != nil {
			return r, refspecErr(spec, "%s", err)
		}
		r.Dst, r.Candidates = d, cands
	case r.Src == "":
		return r, refspecErr(spec, "no source and no destination")
	default:
		if !strings.HasPrefix(r.Src, "refs/heads/") && !strings.HasPrefix(r.Src, "refs/tags/") {
			return r, refspecErr(spec, "a destination is required when the source is not a branch or tag")
		}
		r.Dst = r.Src
		r.Candidates = []string{r.Dst}
		if short, ok := shortSource(src); ok {
			r.Candidates = []string{"refs/heads/" + short, "refs/tags/" + short}
		}
	}
	return r, nil
}

// shortSource reports whether src was a one-word name git could resolve to
// either a branch or a tag.
func shortSource(src string) (string, bool) {
	if strings.HasPrefix(src, "refs/") || strings.HasPrefix(src, "heads/") || strings.HasPrefix(src, "tags/") || src == "HEAD" || src == "@" {
		return "", false
	}
	return src, true
}

// canonicalSource returns the full ref a source names, or the source as
// given for revision expressions and object ids.
func canonicalSource(src, current string) (string, error) {
	base := src
	if i := strings.IndexAny(src, "~^"); i >= 0 {
		base = src[:i]
		for _, c := range src[i:] {
			if c != '~' && c != '^' && (c < '0' || c > '9') {
				return "", errors.New("invalid revision suffix")
			}
		}
	}
	switch {
	case base == "HEAD" || base == "@":
		if base != src {
			return src, nil
		}
		if current == "" {
			return "", errors.New("HEAD is not on a branch")
		}
		return "refs/heads/" + current, nil
	case gitref.IsHexID(base):
		return src, nil
	case !gitref.ValidName(base, true, true):
		return "", errors.New("invalid source ref name")
	}
	if err := gitref.CheckPrefixCase(base); err != nil {
		return "", err
	}
	switch {
	case base != src:
		return src, nil
	case strings.HasPrefix(src, "refs/"):
		return src, nil
	case strings.HasPrefix(src, "heads/"), strings.HasPrefix(src, "tags/"):
		return "refs/" + src, nil
	}
	return "refs/heads/" + src, nil
}

// canonicalDestination returns the full destination ref and the refs git
// could update for it.
func canonicalDestination(dst, src string) (string, []string, error) {
	if !gitref.ValidName(dst, true, true) {
		return "", nil, errors.New("invalid destination ref name")
	}
	if err := gitref.CheckPrefixCase(dst); err != nil {
		return "", nil, err
	}
	if dst == "HEAD" || dst == "@" {
		return "", nil, errors.New("HEAD is not a valid destination")
	}
	switch {
	case strings.HasPrefix(dst, "refs/heads/"), strings.HasPrefix(dst, "refs/tags/"):
		return dst, []string{dst}, nil
	case strings.HasPrefix(dst, "refs/"):
		return "", nil, errors.New("only branches (refs/heads/) and tags (refs/tags/) may be pushed")
	case strings.HasPrefix(dst, "heads/"):
		return "refs/" + dst, []string{"refs/" + dst, "refs/heads/" + dst}, nil
	case strings.HasPrefix(dst, "tags/"):
		return "refs/" + dst, []string{"refs/" + dst, "refs/heads/" + dst}, nil
	case strings.HasPrefix(dst, "remotes/"):
		return "", nil, errors.New("pushing to remote-tracking refs is not allowed")
	}
	full := "refs/heads/" + dst
	if strings.HasPrefix(src, "refs/tags/") {
		full = "refs/tags/" + dst
	}
	return full, []string{"refs/heads/" + dst, "refs/tags/" + dst}, nil
}

// protectedBranch is one protected branch name or single-'*' glob, matched
// case-insensitively against the branch part of refs/heads/....
type protectedBranch struct {
	prefix, suffix string // lower-cased; suffix only for globs
	glob           bool
}

func parseProtectedBranch(name string) (protectedBranch, error) {
	n := strings.TrimPrefix(name, "refs/heads/")
	if !gitref.ValidName(n, true, true) {
		return protectedBranch{}, fmt.Errorf("%q is not a valid branch name or pattern", name)
	}
	n = strings.ToLower(n)
	if i := strings.IndexByte(n, '*'); i >= 0 {
		return protectedBranch{prefix: n[:i], suffix: n[i+1:], glob: true}, nil
	}
	return protectedBranch{prefix: n}, nil
}

// matchesRef reports whether the ref (which may itself be a refspec pattern
// with one '*') could update a protected branch.
func (p protectedBranch) matchesRef(ref string) bool {
	name, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok {
		return false
	}
	name = strings.ToLower(name)
	i := strings.IndexByte(name, '*')
	switch {
	case i < 0 && !p.glob:
		return name == p.prefix
	case i < 0:
		return len(name) >= len(p.prefix)+len(p.suffix) && strings.HasPrefix(name, p.prefix) && strings.HasSuffix(name, p.suffix)
	case !p.glob:
		// The ref pattern a*b could expand to the protected name.
		a, b := name[:i], name[i+1:]
		return len(p.prefix) >= len(a)+len(b) && strings.HasPrefix(p.prefix, a) && strings.HasSuffix(p.prefix, b)
	default:
		// Two globs overlap when their fixed prefixes and suffixes agree.
		a, b := name[:i], name[i+1:]
		return (strings.HasPrefix(a, p.prefix) || strings.HasPrefix(p.prefix, a)) &&
			(strings.HasSuffix(b, p.suffix) || strings.HasSuffix(p.suffix, b))
	}
}
