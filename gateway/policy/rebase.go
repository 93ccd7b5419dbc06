package policy

import (
	"path/filepath"
	"strings"
)

// RebaseWithin returns a copy of p in which every rule's paths.within that
// is from, or lies below it, is moved below to. Compiled rules name the
// deployment's sandbox literally (the shipped base policy says /workspace);
// a test's temporary sandbox, or the compiler's scratch sandbox, evaluates
// them after rebasing. from and to must be absolute and from must not be /
// (otherwise nothing changes); other values (~/..., unrelated directories,
// a string-prefix sibling such as /workspace2) are kept. p is not
// modified.
func (p *CompiledPolicy) RebaseWithin(from, to string) *CompiledPolicy {
	c := *p
	c.Rules = make([]CompiledRule, len(p.Rules))
	copy(c.Rules, p.Rules)
	if !filepath.IsAbs(from) || !filepath.IsAbs(to) {
		return &c
	}
	from, to = filepath.Clean(from), filepath.Clean(to)
	if from == "/" {
		return &c // every directory is below /: nothing to rebase meaningfully
	}
	for i := range c.Rules {
		pc := c.Rules[i].If.Paths
		if pc == nil {
			continue
		}
		w := pc.Within
		if !filepath.IsAbs(w) {
			continue
		}
		w = filepath.Clean(w)
		var rebased string
		switch {
		case w == from:
			rebased = to
		case strings.HasPrefix(w, from+"/"):
			rebased = filepath.Join(to, w[len(from)+1:])
		default:
			continue
		}
		cp := *pc
		cp.Within = rebased
		c.Rules[i].If.Paths = &cp
	}
	return &c
}
