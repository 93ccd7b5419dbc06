package policy

import (
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/gitref"
)

// UpdateKind is what one ref update does, worked out from the objects (is
// the old tip an ancestor of the new one), never from what a client claims.
type UpdateKind int

// Kinds of ref update.
const (
	UpdateCreate      UpdateKind = iota + 1 // the ref does not exist yet
	UpdateFastForward                       // the old tip is an ancestor of the new one
	UpdateForce                             // anything else that moves an existing ref
	UpdateDelete                            // the ref is removed
)

func (k UpdateKind) String() string {
	switch k {
	case UpdateCreate:
		return "create"
	case UpdateFastForward:
		return "fast-forward"
	case UpdateForce:
		return "force"
	case UpdateDelete:
		return "delete"
	}
	return fmt.Sprintf("UpdateKind(%d)", int(k))
}

// RefUpdate is one classified ref update of a push received over the wire.
type RefUpdate struct {
	Ref  string // full ref name
	Kind UpdateKind
	// Old and New are the object ids the update moves the ref between (as
	// found in the mirror; zero ids for none), for the record only.
	Old, New string
}

// RefRefusal says why one ref update of a push is refused.
type RefRefusal struct {
	Ref    string
	Reason string // safe to show the agent
}

// CheckUpdates applies the push invariants of Check to ref updates a
// client sent over the wire (git's receive-pack), already classified from
// the objects: every ref must pass CheckUpdateRef; a non-fast-forward
// update of a branch or any move of an existing tag is a force push; a
// deletion is refused; a protected branch (in any case) may not be
// updated at all. It returns one refusal per refused ref, in order; none
// means the invariants allow the push (the compiled rules still decide).
// The whole push is one decision: a caller refuses every ref when any is
// refused.
func (pc *PushChecker) CheckUpdates(updates []RefUpdate) []RefRefusal {
	var out []RefRefusal
	no := func(ref, format string, a ...any) {
		out = append(out, RefRefusal{Ref: ref, Reason: fmt.Sprintf(format, a...)})
	}
	for _, u := range updates {
		if err := gitref.CheckUpdateRef(u.Ref); err != nil {
			no(u.Ref, "%v", err)
			continue
		}
		tag := strings.HasPrefix(u.Ref, "refs/tags/")
		switch u.Kind {
		case UpdateCreate:
		case UpdateFastForward:
			if tag {
				no(u.Ref, "moving an existing tag is a force push, which is not allowed")
				continue
			}
		case UpdateForce:
			no(u.Ref, "force push (a non-fast-forward update of %s) is not allowed", u.Ref)
			continue
		case UpdateDelete:
			no(u.Ref, "deleting a remote ref (%s) is not allowed", u.Ref)
			continue
		default:
			no(u.Ref, "the update of %s could not be classified", u.Ref)
			continue
		}
		for i, p := range pc.protected {
			if p.matchesRef(u.Ref) {
				no(u.Ref, "pushing to protected branch %q is not allowed", pc.ProtectedBranches[i])
				break
			}
		}
	}
	return out
}
