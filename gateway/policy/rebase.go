package policy

import (
	"fmt"
	"path/filepath"
	"strings"
)

// DefaultCompiledSandbox is the sandbox a compiled policy is taken to be
// compiled for when it does not record one (CompiledPolicy.Sandbox): the
// original's artifacts and ours before the field existed. It is the
// gateway's default sandbox, which the shipped base policy names.
const DefaultCompiledSandbox = "/workspace"

// Rebase says how LoadDir moved a policy's rules to the configured sandbox.
type Rebase struct {
	// From is the sandbox the rules were compiled for; To the configured
	// one (both clean and absolute; equal when nothing moved).
	From, To string
	// Recorded is false when the policy did not record its sandbox and
	// DefaultCompiledSandbox was assumed.
	Recorded bool
	// Rules is the number of rules whose paths.within moved.
	Rules int
}

// Moved reports whether the configured sandbox differs from the one the
// policy was compiled for.
func (r Rebase) Moved() bool { return r.From != r.To }

// String describes the rebase for a log line.
func (r Rebase) String() string {
	how := "recorded in " + CompiledPolicyFile
	if !r.Recorded {
		how = fmt.Sprintf("not recorded in %s; assumed %s", CompiledPolicyFile, DefaultCompiledSandbox)
	}
	if !r.Moved() {
		return fmt.Sprintf("compiled for the configured sandbox %s (%s)", r.To, how)
	}
	return fmt.Sprintf("compiled for sandbox %s (%s), configured sandbox %s: %d rule(s) rebased", r.From, how, r.To, r.Rules)
}

// Rebase returns how LoadDir moved the rules from the sandbox the policy
// was compiled for to the configured one (zero for an engine built by New,
// which takes its rules as given).
func (e *Engine) Rebase() Rebase { return e.rebase }

// rebaseToSettings moves p's rules from the sandbox it was compiled for to
// s.Sandbox, so that changing the deployment's sandbox needs no
// recompilation: a rule within /workspace/x applies to <sandbox>/x. Only a
// within equal to the compiled-for sandbox or below it moves; anything else
// (/, ~/..., a sibling such as /workspace2) keeps its meaning. With no
// configured sandbox nothing moves.
func rebaseToSettings(p *CompiledPolicy, s Settings, file string) (*CompiledPolicy, Rebase, error) {
	from, recorded := p.Sandbox, p.Sandbox != ""
	if !recorded {
		from = DefaultCompiledSandbox
	}
	lexFrom, err := cleanAbs(from, s.home())
	if err != nil {
		return nil, Rebase{}, &FileError{File: file, Path: "sandbox", Err: err}
	}
	if lexFrom == "/" {
		return nil, Rebase{}, &FileError{File: file, Path: "sandbox", Err: fmt.Errorf("%q: a sandbox cannot be the root directory", from)}
	}
	info := Rebase{From: lexFrom, To: lexFrom, Recorded: recorded}
	if s.Sandbox == "" {
		return p, info, nil
	}
	to, err := cleanAbs(s.Sandbox, s.home())
	if err != nil {
		return p, info, nil // compileSettings reports the settings error
	}
	info.To = to
	if to == lexFrom {
		return p, info, nil
	}
	out, n := p.rebaseWithin(lexFrom, to)
	info.Rules = n
	return out, info, nil
}

// RebaseWithin returns a copy of p in which every rule's paths.within that
// is from, or lies below it, is moved below to, and whose Sandbox is to.
// Compiled rules name the deployment's sandbox literally (the shipped base
// policy says /workspace); LoadDir rebases them to the configured sandbox,
// and a test's temporary sandbox, or the compiler's scratch sandbox,
// evaluates them after rebasing. from and to must be absolute and from
// must not be / (otherwise nothing changes); other values (~/...,
// unrelated directories, a string-prefix sibling such as /workspace2) are
// kept. p is not modified.
func (p *CompiledPolicy) RebaseWithin(from, to string) *CompiledPolicy {
	c, _ := p.rebaseWithin(from, to)
	return c
}

// rebaseWithin is RebaseWithin, also counting the rules it moved.
func (p *CompiledPolicy) rebaseWithin(from, to string) (*CompiledPolicy, int) {
	c := *p
	c.Rules = make([]CompiledRule, len(p.Rules))
	copy(c.Rules, p.Rules)
	if !filepath.IsAbs(from) || !filepath.IsAbs(to) {
		return &c, 0
	}
	from, to = filepath.Clean(from), filepath.Clean(to)
	if from == "/" {
		return &c, 0 // every directory is below /: nothing to rebase meaningfully
	}
	c.Sandbox = to
	n := 0
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
		n++
	}
	return &c, n
}
