package opscli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

const escalationsUsage = `usage: ironcurtain escalations list [--status pending|approved|denied|expired|all] [--session S] [--limit N] [--json]
       ironcurtain escalations show ID [--json]
       ironcurtain escalations approve ID [--reason TEXT] [--similar directory|domain|exact] [--json]
       ironcurtain escalations deny ID [--reason TEXT] [--json]
  The ops API URL comes from --ops-url or IRONCURTAIN_OPS_URL (default http://127.0.0.1:8081);
  the operator token from IRONCURTAIN_OPERATOR_TOKEN or --token-file (never a flag value).`

// Escalations runs `ironcurtain escalations`.
func Escalations(ctx context.Context, args []string, e Env) int {
	return finish(e, "escalations", escalations(ctx, args, e))
}

func escalations(ctx context.Context, args []string, e Env) error {
	if len(args) == 0 {
		return usageErr("missing subcommand (list, show, approve or deny)\n%s", escalationsUsage)
	}
	sub := args[0]
	fs := newFlagSet("escalations "+sub, e)
	opsURL := fs.String("ops-url", "", "ops API URL (default $"+EnvOpsURL+" or "+DefaultOpsURL+")")
	tokenFile := fs.String("token-file", "", "file holding the operator token (default $"+EnvOperatorToken+")")
	asJSON := fs.Bool("json", false, "print JSON")
	status := fs.String("status", "pending", "list: pending, approved, denied, expired, cancelled or all")
	session := fs.String("session", "", "list: only this session")
	limit := fs.Int("limit", 100, "list: at most this many")
	reason := fs.String("reason", "", "approve/deny: why (recorded with the decision)")
	similar := fs.String("similar", "", "approve: also approve similar calls of this session (directory, domain or exact)")
	fs.Usage = func() { fmt.Fprintln(e.Stderr, escalationsUsage); fs.PrintDefaults() }
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return usageErr("list takes no arguments")
		}
	case "show", "approve", "deny":
		if len(pos) != 1 {
			return usageErr("%s needs exactly one escalation id", sub)
		}
	default:
		return usageErr("unknown subcommand %q\n%s", sub, escalationsUsage)
	}
	client, err := opsClient(e, *opsURL, *tokenFile)
	if err != nil {
		return err
	}

	switch sub {
	case "list":
		st := *status
		if st == "all" {
			st = ""
		}
		return listEscalations(ctx, e.Stdout, client, escalation.ListFilter{Status: st, Session: *session, Limit: *limit}, *asJSON)
	case "show":
		x, err := client.GetEscalation(ctx, pos[0])
		if err != nil {
			return err
		}
		return printEscalation(e, x, *asJSON)
	default: // approve, deny
		x, err := client.Decide(ctx, pos[0], sub == "approve", opsapi.DecideRequest{Reason: *reason, Similar: *similar})
		if err != nil {
			return err
		}
		return printEscalation(e, x, *asJSON)
	}
}

// listEscalations prints the escalations matching f as they arrive from
// the ops API, one at a time (each page is decoded row by row; tables are
// flushed every tableFlushRows rows; --json prints one JSON array, written
// element by element).
func listEscalations(ctx context.Context, w io.Writer, client *opsapi.Client, f escalation.ListFilter, asJSON bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "ID\tSTATUS\tAUTO\tAGE\tSESSION\tWHAT\tRESOURCE\tREASON")
	}
	n := 0
	err := client.EachEscalation(ctx, f, func(x *escalation.Escalation) error {
		n++
		if asJSON {
			b, err := json.MarshalIndent(x, "  ", "  ")
			if err != nil {
				return err
			}
			sep := ",\n  "
			if n == 1 {
				sep = "[\n  "
			}
			_, err = fmt.Fprintf(w, "%s%s", sep, b)
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.ID, x.Status, autoSummary(x.Auto), time.Since(x.CreatedAt).Round(time.Second),
			x.SessionID, what(*x), oneLine(resource(*x), 60), oneLine(x.Reason, 50))
		if n%tableFlushRows == 0 {
			return tw.Flush()
		}
		return nil
	})
	switch {
	case asJSON && n == 0:
		_, _ = fmt.Fprintln(w, "[]")
	case asJSON:
		_, _ = fmt.Fprintln(w, "\n]")
	default:
		if ferr := tw.Flush(); err == nil {
			err = ferr
		}
		if n == 0 && err == nil {
			fmt.Fprintln(w, "(none)")
		}
	}
	return err
}

func what(x escalation.Escalation) string {
	if x.Kind == escalation.KindEgress {
		return "egress"
	}
	return x.Server + "__" + x.Tool
}

// pathKeys are the argument names that hold paths in the built-in tools
// (filesystem and git), in the order they are shown.
var pathKeys = []string{"path", "source", "destination", "file", "paths", "files"}

// resource is what an escalation is about, for the RESOURCE column: its
// own resource when it has one (a domain for egress, a directory for
// "approve similar"), else the paths in its arguments.
func resource(x escalation.Escalation) string {
	if x.Resource != "" {
		return visible(x.Resource)
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(x.Args, &args) != nil {
		return ""
	}
	var paths []string
	for _, k := range pathKeys {
		raw, ok := args[k]
		if !ok {
			continue
		}
		var one string
		var many []json.RawMessage
		switch {
		case json.Unmarshal(raw, &one) == nil:
			paths = append(paths, one)
		case json.Unmarshal(raw, &many) == nil:
			for _, m := range many {
				if json.Unmarshal(m, &one) == nil {
					paths = append(paths, one)
				}
			}
		}
	}
	for i, p := range paths {
		paths[i] = visible(p)
	}
	return strings.Join(paths, " ")
}

// visible shows agent-written text safely on a terminal: control, bidi
// and other invisible characters (and quotes and backslashes) are escaped,
// so a path cannot move the cursor, recolour the screen or reorder what
// the operator reads.
func visible(s string) string {
	q := strconv.QuoteToGraphic(s)
	if q[1:len(q)-1] == s && !strings.ContainsAny(s, " ") {
		return s
	}
	return q
}

func printEscalation(e Env, x escalation.Escalation, asJSON bool) error {
	if asJSON {
		return printJSON(e.Stdout, x)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", x.ID)
	row("status", x.Status)
	row("session", x.SessionID)
	row("call", x.CallID)
	row("what", what(x))
	row("resource", resource(x))
	row("rule", x.Rule)
	row("reason", x.Reason)
	row("arguments", string(x.Args))
	row("created", x.CreatedAt.Local().Format(time.RFC3339))
	row("expires", x.ExpiresAt.Local().Format(time.RFC3339))
	if x.DecidedAt != nil {
		row("decided", x.DecidedAt.Local().Format(time.RFC3339))
	}
	row("decided by", x.DecidedBy)
	row("decision reason", x.DecisionReason)
	if a := x.Auto; a != nil {
		row("auto-approver", fmt.Sprintf("%s (%s; model %s; %d tokens)", a.Verdict, a.Outcome, visible(a.Model), a.Tokens))
		// Model output: shown on one line with control characters quoted.
		row("auto reasoning", visible(oneLine(a.Reasoning, escalation.MaxReasoningChars)))
	}
	return tw.Flush()
}

// autoSummary is the AUTO column: what the auto-approver said ("-": it
// was not consulted).
func autoSummary(a *escalation.AutoReview) string {
	switch {
	case a == nil:
		return "-"
	case a.Verdict == a.Outcome || (a.Verdict == escalation.VerdictApprove && a.Outcome == escalation.OutcomeApproved):
		return a.Verdict
	}
	return a.Verdict + ":" + a.Outcome
}
