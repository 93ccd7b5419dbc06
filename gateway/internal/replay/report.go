package replay

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// skipText explains each reason a record was not replayed.
var skipText = map[string]string{
	SkipTruncated:   "arguments cut before storage ($truncated)",
	SkipRedacted:    "a secret was masked before storage",
	SkipInvalidArgs: "stored arguments are not a JSON object",
	SkipGitState:    "the decision reads a repository (push refs, remotes)",
	SkipHardLink:    "refused for a hard link, which replay cannot see",
	SkipGateway:     "decided by the gateway outside the policy (loop breaker, budget, tool pin, a door)",
	SkipBadRecord:   "the recorded decision is not allow, deny or escalate",
	SkipDoor:        "came through the git HTTP door or the GitHub relay (request facts mixed into the arguments)",
	SkipWorkspace:   "a minted session's call whose workspace no longer exists",
}

// WriteTable writes the report for a terminal: a summary, then one row per
// transition (looser first) with up to MaxExamples example calls under each
// changed row.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Replayed %d of %d recorded calls under %s (version %s)", r.Replayed, r.Records, r.Candidate, r.CandidateVersion)
	if !r.Since.IsZero() || !r.Until.IsZero() {
		fmt.Fprintf(&b, ", recorded %s to %s", timeOrDash(r.Since), timeOrDash(r.Until))
	}
	if r.Session != "" {
		fmt.Fprintf(&b, ", session %s", r.Session)
	}
	if r.Server != "" {
		fmt.Fprintf(&b, ", server %s", r.Server)
	}
	fmt.Fprintf(&b, ", in %s.\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "  looser %d, tighter %d, other rule %d, unchanged %d\n", r.Counts[Looser], r.Counts[Tighter], r.Counts[RuleOnly], r.Counts[Unchanged])
	if len(r.NotReplayable) > 0 {
		b.WriteString("  not replayable (counted apart, never guessed):\n")
		for _, k := range sortedKeys(r.NotReplayable) {
			fmt.Fprintf(&b, "    %-13s %d  %s\n", k, r.NotReplayable[k], skipText[k])
		}
	}
	if len(r.Versions) > 0 {
		b.WriteString("  recorded under policy versions:")
		for _, k := range sortedKeys(r.Versions) {
			name := k
			if name == "" {
				name = "(unknown)"
			}
			fmt.Fprintf(&b, " %s×%d", name, r.Versions[k])
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(r.Transitions) == 0 {
		_, err := io.WriteString(w, "\n(no calls replayed)\n")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCHANGE\tDECISION\tRULE\tCALLS\tPATH STATE")
	for _, t := range r.Transitions {
		fmt.Fprintf(tw, "%s\t%s → %s\t%s → %s\t%d\t%s\n", t.Change, t.OldDecision, t.NewDecision, t.OldRule, t.NewRule, t.Calls, pathState(t))
		for _, e := range t.Examples {
			fmt.Fprintf(tw, "  e.g.\t%s\t%s %s %s\t\t\n", e.At.UTC().Format(time.RFC3339), e.CallID, e.Tool, oneLine(e.Args))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Looser() {
		_, err := fmt.Fprintf(w, "\n%d %s would be decided more loosely.\n", r.Counts[Looser], plural(r.Counts[Looser], "call", "calls"))
		return err
	}
	return nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func pathState(t *Transition) string {
	if t.PathState == 0 {
		return "-"
	}
	return fmt.Sprintf("%d on paths as recorded", t.PathState)
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// oneLine makes agent-written text safe for one table line: control
// characters (newlines, escapes that would drive the terminal) are shown
// escaped.
func oneLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			fmt.Fprintf(&b, "\\x%02x", r)
		case r == 0x200b || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0xfeff:
			fmt.Fprintf(&b, "\\u%04x", r) // invisible and bidi controls
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
