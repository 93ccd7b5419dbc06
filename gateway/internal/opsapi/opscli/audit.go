package opscli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/opsapi"
	"ironcurtain.dev/gateway/internal/store"
)

const auditUsage = `usage: ironcurtain audit verify [--session ID] [--json]
       ironcurtain audit query  [--session S] [--server S] [--tool T] [--decision D] [--since 1h|RFC3339] [--limit N] [--json]
       ironcurtain audit tail   [same filters] [--interval 1s] [--json]
  The database URL comes from --database-url or IRONCURTAIN_DATABASE_URL.`

// errBroken makes verify exit 1 after printing its report.
var errBroken = errors.New("the audit hash chain is broken")

// Audit runs `ironcurtain audit`.
func Audit(ctx context.Context, args []string, e Env) int {
	return finish(e, "audit", auditCmd(ctx, args, e))
}

type auditFlags struct {
	dsn, session, server, tool, decision, since string
	limit                                       int
	interval                                    time.Duration
	json                                        bool
}

func auditCmd(ctx context.Context, args []string, e Env) error {
	if len(args) == 0 {
		return usageErr("missing subcommand (verify, query or tail)\n%s", auditUsage)
	}
	sub := args[0]
	fs := newFlagSet("audit "+sub, e)
	var f auditFlags
	fs.StringVar(&f.dsn, "database-url", "", "Postgres URL (default $"+EnvDatabaseURL+")")
	fs.StringVar(&f.session, "session", "", "only this session")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	if sub == "query" || sub == "tail" {
		fs.StringVar(&f.server, "server", "", "only this tool server")
		fs.StringVar(&f.tool, "tool", "", "only this tool")
		fs.StringVar(&f.decision, "decision", "", "only allow, deny or escalate")
		fs.StringVar(&f.since, "since", "", "from this time (RFC 3339) or this long ago (15m, 24h)")
		fs.IntVar(&f.limit, "limit", audit.DefaultQueryLimit, "at most this many rows")
		fs.DurationVar(&f.interval, "interval", time.Second, "tail: poll interval")
	}
	fs.Usage = func() { fmt.Fprintln(e.Stderr, auditUsage); fs.PrintDefaults() }
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("unexpected argument %q\n%s", pos[0], auditUsage)
	}
	switch sub {
	case "verify", "query", "tail":
	default:
		return usageErr("unknown subcommand %q\n%s", sub, auditUsage)
	}
	filter := audit.Filter{Session: f.session, Server: f.server, Tool: f.tool, Decision: f.decision, Limit: f.limit}
	if filter.Since, err = opsapi.ParseSince(f.since, time.Now()); err != nil {
		return usageErr("--since: %v", err)
	}
	if err := filter.Validate(); err != nil {
		return usageErr("%v", err)
	}
	if f.dsn == "" {
		f.dsn = e.Getenv(EnvDatabaseURL)
	}
	pool, err := store.Open(ctx, f.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch sub {
	case "verify":
		checks, err := audit.Verify(ctx, pool, f.session)
		if err != nil {
			return err
		}
		broken := 0
		for _, c := range checks {
			if c.Break != nil {
				broken++
			}
		}
		if f.json {
			if err := printJSON(e.Stdout, checks); err != nil {
				return err
			}
		} else {
			for _, c := range checks {
				if c.Break != nil {
					fmt.Fprintf(e.Stdout, "BROKEN  %s\n", c.Break)
				} else {
					fmt.Fprintf(e.Stdout, "ok      session %q: %d records, head %s\n", c.SessionID, c.Records, c.Head)
				}
			}
			fmt.Fprintf(e.Stdout, "%d sessions checked, %d broken\n", len(checks), broken)
		}
		if broken > 0 {
			return errBroken
		}
		return nil
	case "query":
		calls, err := audit.Query(ctx, pool, filter)
		if err != nil {
			return err
		}
		return printCalls(e.Stdout, calls, f.json, true)
	default: // tail
		// Start with the latest rows, oldest first, then follow.
		calls, err := audit.Query(ctx, pool, audit.Filter{Session: filter.Session, Server: filter.Server, Tool: filter.Tool,
			Decision: filter.Decision, Since: filter.Since, Limit: min(filter.Limit, 20)})
		if err != nil {
			return err
		}
		for i, j := 0, len(calls)-1; i < j; i, j = i+1, j-1 {
			calls[i], calls[j] = calls[j], calls[i]
		}
		if err := printCalls(e.Stdout, calls, f.json, true); err != nil {
			return err
		}
		last := time.Now().Add(-time.Hour * 24 * 365 * 100)
		if len(calls) > 0 {
			last = calls[len(calls)-1].Time
		}
		filter.After = last
		ticker := time.NewTicker(f.interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
			}
			calls, err := audit.Query(ctx, pool, filter)
			if err != nil {
				return ctxErr(ctx, err)
			}
			if len(calls) > 0 {
				filter.After = calls[len(calls)-1].Time
				if err := printCalls(e.Stdout, calls, f.json, false); err != nil {
					return err
				}
			}
		}
	}
}

func printCalls(w io.Writer, calls []audit.ToolCall, asJSON, header bool) error {
	if asJSON {
		for _, c := range calls { // one object per line: easy to pipe
			if err := printJSONLine(w, c); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, "TIME\tSESSION\tTOOL\tDECISION\tOUTCOME\tRULE\tREASON")
	}
	for _, c := range calls {
		outcome := "-"
		if c.Outcome != nil {
			outcome = c.Outcome.Status
		}
		fmt.Fprintf(tw, "%s\t%s\t%s__%s\t%s\t%s\t%s\t%s\n", c.Time.Local().Format("2006-01-02 15:04:05"), c.SessionID,
			c.Server, c.Tool, c.Decision, outcome, oneLine(c.Rule, 30), oneLine(c.Reason, 60))
	}
	return tw.Flush()
}

func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
