package filesystem

import (
	"fmt"
	"path"
	"strings"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// Pattern limits: matching costs O(alternatives x pattern segments x path
// segments) per visited entry, and the agent controls both the pattern and
// the depth of the tree.
const (
	maxBraceAlternatives = 32
	maxPatternSegments   = 32
)

// glob is a compiled minimatch-style pattern matched against slash paths
// relative to a walk's start, with dot files included: "*", "?" and "[...]"
// within a segment (path.Match syntax, backslash escapes), "**" as a whole
// segment for any number of segments, and "{a,b}" alternatives.
type glob struct {
	alts  [][]string // each alternative split into segments
	cells int        // sum over alternatives of (segments + 1): the cost factor
}

// cost estimates the work of matching a path of n segments.
func (g *glob) cost(n int) int64 { return int64(g.cells) * int64(n+1) }

// compileGlobs compiles search and exclude patterns. A pattern without
// wildcards used as an exclude pattern also matches that name (or path) at
// any depth and everything beneath it, like the reference directory_tree.
func compileGlobs(pats []string) ([]*glob, error) {
	if len(pats) > maxPatterns {
		return nil, &toolError{msg: fmt.Sprintf("too many patterns (limit %d)", maxPatterns)}
	}
	out := make([]*glob, 0, len(pats))
	for _, p := range pats {
		g, err := compileGlob(p)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func compileGlob(p string) (*glob, error) {
	bad := func(why string) error {
		return &toolError{msg: fmt.Sprintf("invalid pattern %q: %s", toolargs.Clip(p), why)}
	}
	switch {
	case p == "":
		return nil, bad("empty")
	case len(p) > maxPatternLen:
		return nil, bad("too long")
	case checkText(p) != nil:
		return nil, bad("control characters or invalid UTF-8")
	}
	expanded, err := expandBraces(p)
	if err != nil {
		return nil, bad(err.Error())
	}
	g := &glob{}
	for _, e := range expanded {
		segs := strings.Split(strings.Trim(e, "/"), "/")
		if len(segs) > maxPatternSegments {
			return nil, bad(fmt.Sprintf("more than %d path segments", maxPatternSegments))
		}
		g.cells += len(segs) + 1
		for _, s := range segs {
			if s == "**" {
				continue
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, bad("malformed")
			}
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// matchExclude is match plus, for a pattern without wildcards, the
// "anywhere and beneath" reading of exclude patterns.
func (g *glob) matchExclude(rel string) bool {
	if g.match(rel) {
		return true
	}
	segs := strings.Split(rel, "/")
	for _, alt := range g.alts {
		if hasWildcard(alt) {
			continue
		}
		// alt occurs as a run of whole segments anywhere in rel.
		for i := 0; i+len(alt) <= len(segs); i++ {
			if equalSegs(segs[i:i+len(alt)], alt) {
				return true
			}
		}
	}
	return false
}

func hasWildcard(segs []string) bool {
	for _, s := range segs {
		if strings.ContainsAny(s, `*?[\`) {
			return true
		}
	}
	return false
}

func equalSegs(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// match reports whether the slash path rel matches g.
func (g *glob) match(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, alt := range g.alts {
		if matchSegs(alt, segs) {
			return true
		}
	}
	return false
}

// matchSegs matches pattern segments against path segments in O(p*s) time
// (no backtracking blow-up however many "**" there are).
func matchSegs(ps, ss []string) bool {
	n, m := len(ps), len(ss)
	w := m + 1
	var small [64]bool
	dp := small[:0]
	if (n+1)*w <= len(small) {
		dp = small[:(n+1)*w]
	} else {
		dp = make([]bool, (n+1)*w)
	}
	// dp[i*w+j]: ps[i:] matches ss[j:].
	dp[n*w+m] = true
	for i := n - 1; i >= 0; i-- {
		for j := m; j >= 0; j-- {
			if ps[i] == "**" {
				dp[i*w+j] = dp[(i+1)*w+j] || (j < m && dp[i*w+j+1])
				continue
			}
			if j < m && dp[(i+1)*w+j+1] {
				ok, _ := path.Match(ps[i], ss[j])
				dp[i*w+j] = ok
			}
		}
	}
	return dp[0]
}

// expandBraces expands "{a,b}" alternatives (nested allowed, backslash
// escapes respected). A brace group without a top-level comma is literal.
func expandBraces(p string) ([]string, error) {
	out := []string{}
	var rec func(s string) error
	rec = func(s string) error {
		open, close, commas := findBraces(s)
		if open < 0 {
			if len(out) >= maxBraceAlternatives {
				return fmt.Errorf("more than %d brace alternatives", maxBraceAlternatives)
			}
			out = append(out, s)
			return nil
		}
		pre, post := s[:open], s[close+1:]
		start := open + 1
		for _, c := range append(commas, close) {
			if err := rec(pre + s[start:c] + post); err != nil {
				return err
			}
			start = c + 1
		}
		return nil
	}
	if err := rec(p); err != nil {
		return nil, err
	}
	return out, nil
}

// findBraces finds the first brace group of s that has a top-level comma,
// returning the indexes of "{", "}" and the commas, or open = -1.
func findBraces(s string) (open, close int, commas []int) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			end, cs := braceGroup(s, i)
			if end < 0 {
				return -1, -1, nil
			}
			if len(cs) > 0 {
				return i, end, cs
			}
		}
	}
	return -1, -1, nil
}

// braceGroup returns the index of the "}" closing the "{" at s[open] and
// the commas at its top level, or -1 when it is not closed.
func braceGroup(s string, open int) (int, []int) {
	depth := 0
	var commas []int
	for j := open; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j, commas
			}
		case ',':
			if depth == 1 {
				commas = append(commas, j)
			}
		}
	}
	return -1, nil
}
