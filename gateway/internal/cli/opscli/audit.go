package opscli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
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
		return verify(ctx, e, pool, f)
	case "query":
		return printCalls(ctx, e.Stdout, pool, filter, f.json, true, nil)
	default: // tail
		// Start with the latest rows, oldest first, then follow.
		var last audit.ToolCall
		first := audit.Filter{Session: filter.Session, Server: filter.Server, Tool: filter.Tool,
			Decision: filter.Decision, Since: filter.Since, Limit: min(filter.Limit, 20)}
		calls, err := audit.Query(ctx, pool, first) // at most 20 rows
		if err != nil {
			return err
		}
		for i, j := 0, len(calls)-1; i < j; i, j = i+1, j-1 {
			calls[i], calls[j] = calls[j], calls[i]
		}
		if err := writeCalls(e.Stdout, calls, f.json, true); err != nil {
			return err
		}
		filter.After = time.Now().Add(-time.Hour * 24 * 365 * 100)
		if len(calls) > 0 {
			last = calls[len(calls)-1]
			filter.After, filter.Cursor = last.Time.Add(-time.Microsecond), last.Cursor()
		}
		ticker := time.NewTicker(f.interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
			}
			err := printCalls(ctx, e.Stdout, pool, filter, f.json, false, func(c *audit.ToolCall) {
				filter.Cursor = c.Cursor()
			})
			if err != nil {
				return ctxErr(ctx, err)
			}
			// Rows at the cursor's instant but after it are still to come.
			if !filter.Cursor.IsZero() {
				filter.After = filter.Cursor.Time.Add(-time.Microsecond)
			}
		}
	}
}

// verify walks each session's chain one row at a time and prints each
// session as soon as it is checked.
func verify(ctx context.Context, e Env, pool *pgxpool.Pool, f auditFlags) error {
	var sessions, broken, gapped int
	var records int64
	start := time.Now()
	err := audit.VerifyEach(ctx, pool, f.session, func(c audit.SessionCheck) error {
		sessions++
		records += c.Records
		if c.Break != nil {
			broken++
		}
		if c.GapCount > 0 {
			gapped++
		}
		if f.json { // one JSON array, written element by element
			sep := ",\n"
			if sessions == 1 {
				sep = "[\n"
			}
			if _, err := io.WriteString(e.Stdout, sep); err != nil {
				return err
			}
			b, err := json.MarshalIndent(c, "  ", "  ")
			if err != nil {
				return err
			}
			_, err = e.Stdout.Write(append([]byte("  "), b...))
			return err
		}
		if c.Break != nil {
			_, err := fmt.Fprintf(e.Stdout, "BROKEN  %s\n", c.Break)
			return err
		}
		fmt.Fprintf(e.Stdout, "ok      session %q: %d records, head %s (%.0f records/s)\n", c.SessionID, c.Records, c.Head, c.RecordsPerSecond)
		for _, g := range c.Gaps {
			fmt.Fprintf(e.Stdout, "GAP     session %q: %s\n", c.SessionID, g)
		}
		if more := c.GapCount - len(c.Gaps); more > 0 {
			fmt.Fprintf(e.Stdout, "GAP     session %q: %d more decisions without an outcome\n", c.SessionID, more)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if f.json {
		end := "\n]\n"
		if sessions == 0 {
			end = "[]\n"
		}
		if _, err := io.WriteString(e.Stdout, end); err != nil {
			return err
		}
	} else {
		secs := time.Since(start).Seconds()
		fmt.Fprintf(e.Stdout, "%d sessions checked, %d broken, %d with decisions missing an outcome; %d records in %.1fs (%.0f records/s)\n",
			sessions, broken, gapped, records, secs, float64(records)/max(secs, 1e-9))
	}
	if broken > 0 {
		return errBroken
	}
	return nil
}

// tableFlushRows is how many table rows are buffered (for column widths)
// before they are written.
const tableFlushRows = 100

// printCalls streams the tool calls matching filter to w, one row at a
// time (tables are flushed every tableFlushRows rows). seen, when set, is
// called with each row after it is printed.
func printCalls(ctx context.Context, w io.Writer, pool *pgxpool.Pool, filter audit.Filter, asJSON, header bool, seen func(*audit.ToolCall)) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header && !asJSON {
		fmt.Fprintln(tw, callHeader)
	}
	n := 0
	err := audit.QueryEach(ctx, pool, filter, func(c *audit.ToolCall) error {
		if asJSON {
			if err := printJSONLine(w, c); err != nil {
				return err
			}
		} else {
			writeCallRow(tw, c)
			if n++; n%tableFlushRows == 0 {
				if err := tw.Flush(); err != nil {
					return err
				}
			}
		}
		if seen != nil {
			seen(c)
		}
		return nil
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

const callHeader = "TIME\tSESSION\tTOOL\tDECISION\tOUTCOME\tRULE\tREASON"

func writeCallRow(tw io.Writer, c *audit.ToolCall) {
	outcome := "-"
	if c.Outcome != nil {
		outcome = c.Outcome.Status
	}
	fmt.Fprintf(tw, "%s\t%s\t%s__%s\t%s\t%s\t%s\t%s\n", c.Time.Local().Format("2006-01-02 15:04:05"), c.SessionID,
		c.Server, c.Tool, c.Decision, outcome, oneLine(c.Rule, 30), oneLine(c.Reason, 60))
}

func writeCalls(w io.Writer, calls []audit.ToolCall, asJSON, header bool) error {
	if asJSON {
		for i := range calls { // one object per line: easy to pipe
			if err := printJSONLine(w, &calls[i]); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, callHeader)
	}
	for i := range calls {
		writeCallRow(tw, &calls[i])
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
