package opscli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/session/minted"
)

const sessionsUsage = `usage: ironcurtain sessions create --name NAME [--ttl 8h | --expires-at RFC3339] [--max-tokens N] [--max-cost-usd X]
                                 [--max-tool-calls N] [--label key=value ...] [--print-token | --json]
       ironcurtain sessions list [--status active|expired|revoked|static|all] [--limit N] [--json]
       ironcurtain sessions show ID [--json]
       ironcurtain sessions revoke ID [--reason TEXT] [--json]
  create prints the new session's agent token ONCE (--print-token: only the token, for scripts).
  The ops API URL comes from --ops-url or IRONCURTAIN_OPS_URL (default http://127.0.0.1:8081);
  the operator token from IRONCURTAIN_OPERATOR_TOKEN or --token-file (never a flag value).`

// Sessions runs `ironcurtain sessions`.
func Sessions(ctx context.Context, args []string, e Env) int {
	return finish(e, "sessions", sessions(ctx, args, e))
}

// labelFlag collects repeated --label key=value.
type labelFlag map[string]string

func (l labelFlag) String() string { return "" }

func (l labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	if _, dup := l[k]; dup {
		return fmt.Errorf("label %q given twice", k)
	}
	l[k] = val
	return nil
}

func sessions(ctx context.Context, args []string, e Env) error {
	if len(args) == 0 {
		return usageErr("missing subcommand (create, list, show or revoke)\n%s", sessionsUsage)
	}
	sub := args[0]
	fs := newFlagSet("sessions "+sub, e)
	opsURL := fs.String("ops-url", "", "ops API URL (default $"+EnvOpsURL+" or "+DefaultOpsURL+")")
	tokenFile := fs.String("token-file", "", "file holding the operator token (default $"+EnvOperatorToken+")")
	asJSON := fs.Bool("json", false, "print JSON")
	name := fs.String("name", "", "create: the run's name (letters, digits, '.', '_', '-')")
	ttl := fs.String("ttl", "", "create: lifetime such as 30m or 8h (default 8h; at most 30 days)")
	expiresAt := fs.String("expires-at", "", "create: expiry as an RFC 3339 time (instead of --ttl)")
	maxTokens := fs.Int64("max-tokens", 0, "create: model token budget (0: the gateway's default)")
	maxCost := fs.Float64("max-cost-usd", 0, "create: model cost budget in US dollars (0: the gateway's default)")
	maxCalls := fs.Int64("max-tool-calls", 0, "create: tool-call budget (0: no limit)")
	labels := labelFlag{}
	fs.Var(labels, "label", "create: key=value (repeatable)")
	printToken := fs.Bool("print-token", false, "create: print only the agent token")
	status := fs.String("status", "all", "list: active, expired, revoked, static or all")
	limit := fs.Int("limit", 100, "list: at most this many (most recently active first)")
	reason := fs.String("reason", "", "revoke: why (recorded with the revocation and on cancelled escalations)")
	fs.Usage = func() { fmt.Fprintln(e.Stderr, sessionsUsage); fs.PrintDefaults() }
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "create", "list":
		if len(pos) != 0 {
			return usageErr("%s takes no arguments", sub)
		}
	case "show", "revoke":
		if len(pos) != 1 {
			return usageErr("%s needs exactly one session id", sub)
		}
	default:
		return usageErr("unknown subcommand %q\n%s", sub, sessionsUsage)
	}
	switch *status {
	case "all", "active", "expired", "revoked", opsapi.StatusStatic:
	default:
		return usageErr("--status: want active, expired, revoked, static or all")
	}
	req := opsapi.CreateSessionRequest{Name: *name, TTL: *ttl, Labels: labels,
		Budget: opsBudget(*maxTokens, *maxCost, *maxCalls)}
	if sub == "create" {
		if *name == "" {
			return usageErr("create needs --name")
		}
		if *printToken && *asJSON {
			return usageErr("--print-token and --json exclude each other")
		}
		if *expiresAt != "" {
			t, err := time.Parse(time.RFC3339, *expiresAt)
			if err != nil {
				return usageErr("--expires-at: want an RFC 3339 time such as 2026-01-02T15:04:05Z")
			}
			req.ExpiresAt = &t
		}
		if len(labels) == 0 {
			req.Labels = nil
		}
	}
	client, err := opsClient(e, *opsURL, *tokenFile)
	if err != nil {
		return err
	}

	switch sub {
	case "create":
		out, err := client.CreateSession(ctx, req)
		if err != nil {
			return err
		}
		switch {
		case *printToken:
			_, err = fmt.Fprintln(e.Stdout, out.Token)
			return err
		case *asJSON:
			return printJSON(e.Stdout, out)
		}
		if err := printSession(e, out.Session); err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.Stdout, "\nagent token (shown once; it is not stored):\n%s\n", out.Token)
		return err
	case "list":
		var list []opsapi.SessionSummary
		if err := client.EachSession(ctx, opsapi.SessionFilter{Status: *status, Limit: *limit}, func(s *opsapi.SessionSummary) error {
			list = append(list, *s)
			return nil
		}); err != nil {
			return err
		}
		if *asJSON {
			if list == nil {
				list = []opsapi.SessionSummary{}
			}
			return printJSON(e.Stdout, list)
		}
		return printSessions(e, list)
	case "show":
		s, err := client.GetSession(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.Stdout, s)
		}
		return printSession(e, s)
	default: // revoke
		out, err := client.RevokeSession(ctx, pos[0], *reason)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.Stdout, out)
		}
		if err := printSession(e, out.Session); err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.Stdout, "cancelled escalations: %d %s\n", len(out.CancelledEscalations), strings.Join(out.CancelledEscalations, " "))
		return err
	}
}

func opsBudget(tokens int64, cost float64, calls int64) minted.Budget {
	return minted.Budget{MaxTokens: tokens, MaxCostUSD: cost, MaxToolCalls: calls}
}

func printSessions(e Env, list []opsapi.SessionSummary) error {
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tEXPIRES\tCALLS\tDENIED\tESCALATED\tTOKENS\tCOST\tLAST ACTIVITY")
	for _, s := range list {
		name, expires := "", ""
		if s.Minted != nil {
			name, expires = s.Minted.Name, s.Minted.ExpiresAt.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t$%.4f\t%s\n", oneLine(s.SessionID, 40), name, s.Status, expires,
			s.ToolCalls, s.Denied, s.Escalated, s.LLMTokens, s.LLMCostUSD, s.LastSeen.Local().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(e.Stdout, "(none)")
	}
	return nil
}

func printSession(e Env, s opsapi.SessionSummary) error {
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", s.SessionID)
	row("status", s.Status)
	if m := s.Minted; m != nil {
		row("name", m.Name)
		row("created", m.CreatedAt.Local().Format(time.RFC3339)+" by "+m.CreatedBy)
		row("expires", m.ExpiresAt.Local().Format(time.RFC3339))
		if m.RevokedAt != nil {
			row("revoked", m.RevokedAt.Local().Format(time.RFC3339)+" by "+m.RevokedBy)
			row("revoke reason", m.RevokeReason)
		}
		row("budget", budgetText(m.Budget.MaxTokens, m.Budget.MaxCostUSD, m.Budget.MaxToolCalls, m.ToolCallsUsed))
		keys := make([]string, 0, len(m.Labels))
		for k := range m.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			row("label "+k, m.Labels[k])
		}
	}
	row("tool calls", fmt.Sprintf("%d (allowed %d, denied %d, escalated %d; pending escalations %d)", s.ToolCalls, s.Allowed, s.Denied, s.Escalated, s.PendingEscalations))
	row("egress requests", fmt.Sprint(s.EgressRequests))
	row("model usage", fmt.Sprintf("%d tokens, $%.4f", s.LLMTokens, s.LLMCostUSD))
	row("last activity", s.LastSeen.Local().Format(time.RFC3339))
	return tw.Flush()
}

func budgetText(tokens int64, cost float64, calls, used int64) string {
	var parts []string
	if tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d model tokens", tokens))
	}
	if cost > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f model cost", cost))
	}
	if calls > 0 {
		parts = append(parts, fmt.Sprintf("%d tool calls (%d used)", calls, used))
	}
	if len(parts) == 0 {
		return "the gateway's defaults"
	}
	return strings.Join(parts, ", ")
}
