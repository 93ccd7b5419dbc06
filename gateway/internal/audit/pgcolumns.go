package audit

import (
	"fmt"
	"strings"
	"time"
)

// tableColumns gathers a batch's rows column by column, so each table gets
// one INSERT ... SELECT FROM unnest(...) whatever the batch size (see writeSQL).
type tableColumns struct {
	dec struct {
		callID, session                                  []string
		seq                                              []int64
		at                                               []time.Time
		server, tool, args, decision, rule, reason       []string
		shadowDecision, shadowRule, escalationID, detail []string
		policyVersion, traceID                           []string
		prev, hash                                       [][]byte
	}
	out struct {
		callID, session, status, errText []string
		seq, durationNS, resultBytes     []int64
		at                               []time.Time
		truncated                        []bool
		prev, hash                       [][]byte
	}
	egr struct {
		id, session, toolCallID, kind, method, host, resolvedIP, decision, reason, rule, errText []string
		traceID                                                                                  []string
		seq, bytesUp, bytesDown, durationNS                                                      []int64
		port                                                                                     []int32
		at                                                                                       []time.Time
		prev, hash                                                                               [][]byte
	}
	llm struct {
		id, session, provider, model, path, errText []string
		traceID                                     []string
		seq, inputTokens, outputTokens, durationNS  []int64
		statusCode                                  []int32
		stream                                      []bool
		cost                                        []float64
		at                                          []time.Time
		prev, hash                                  [][]byte
	}
}

func (c *tableColumns) add(e Event, seq int64, prev, hash []byte) {
	switch x := e.(type) {
	case *ToolCallDecision:
		d := &c.dec
		d.callID, d.session, d.seq, d.at = append(d.callID, x.CallID), append(d.session, x.SessionID), append(d.seq, seq), append(d.at, x.Time)
		d.server, d.tool, d.args = append(d.server, x.Server), append(d.tool, x.Tool), append(d.args, string(x.Args))
		d.decision, d.rule, d.reason = append(d.decision, x.Decision), append(d.rule, x.Rule), append(d.reason, x.Reason)
		d.shadowDecision, d.shadowRule = append(d.shadowDecision, x.ShadowDecision), append(d.shadowRule, x.ShadowRule)
		d.escalationID, d.detail = append(d.escalationID, x.EscalationID), append(d.detail, x.Detail)
		d.policyVersion, d.traceID = append(d.policyVersion, x.PolicyVersion), append(d.traceID, traceIDColumn(x.TraceID))
		d.prev, d.hash = append(d.prev, prev), append(d.hash, hash)
	case *ToolCallOutcome:
		o := &c.out
		o.callID, o.session, o.seq, o.at = append(o.callID, x.CallID), append(o.session, x.SessionID), append(o.seq, seq), append(o.at, x.Time)
		o.status, o.durationNS, o.resultBytes = append(o.status, x.Status), append(o.durationNS, int64(x.Duration)), append(o.resultBytes, int64(x.ResultBytes))
		o.truncated, o.errText = append(o.truncated, x.Truncated), append(o.errText, x.Error)
		o.prev, o.hash = append(o.prev, prev), append(o.hash, hash)
	case *EgressEvent:
		g := &c.egr
		g.id, g.session, g.seq, g.toolCallID, g.at = append(g.id, x.ID), append(g.session, x.SessionID), append(g.seq, seq), append(g.toolCallID, x.ToolCallID), append(g.at, x.Time)
		g.kind, g.method, g.host, g.port = append(g.kind, x.Kind), append(g.method, x.Method), append(g.host, x.Host), append(g.port, int32(x.Port))
		g.resolvedIP, g.decision, g.reason, g.rule = append(g.resolvedIP, x.ResolvedIP), append(g.decision, x.Decision), append(g.reason, x.Reason), append(g.rule, x.Rule)
		g.bytesUp, g.bytesDown, g.durationNS, g.errText = append(g.bytesUp, x.BytesUp), append(g.bytesDown, x.BytesDown), append(g.durationNS, int64(x.Duration)), append(g.errText, x.Error)
		g.traceID = append(g.traceID, traceIDColumn(x.TraceID))
		g.prev, g.hash = append(g.prev, prev), append(g.hash, hash)
	case *LLMCall:
		l := &c.llm
		l.id, l.session, l.seq, l.at = append(l.id, x.ID), append(l.session, x.SessionID), append(l.seq, seq), append(l.at, x.Time)
		l.provider, l.model, l.path, l.stream = append(l.provider, x.Provider), append(l.model, x.Model), append(l.path, x.Path), append(l.stream, x.Stream)
		l.statusCode, l.inputTokens, l.outputTokens = append(l.statusCode, int32(x.StatusCode)), append(l.inputTokens, x.InputTokens), append(l.outputTokens, x.OutputTokens)
		l.cost, l.durationNS, l.errText = append(l.cost, x.CostUSD), append(l.durationNS, int64(x.Duration)), append(l.errText, x.Error)
		l.traceID = append(l.traceID, traceIDColumn(x.TraceID))
		l.prev, l.hash = append(l.prev, prev), append(l.hash, hash)
	}
}

// Columns of the audit tables in the order tableColumns passes them: name
// and Postgres type.
var (
	toolCallColumns = []string{
		"call_id text", "session_id text", "seq bigint", "at timestamptz", "server text", "tool text", "args text",
		"decision text", "rule text", "reason text", "shadow_decision text", "shadow_rule text", "escalation_id text",
		"detail text", "policy_version text", "trace_id text", "prev_hash bytea", "hash bytea",
	}
	outcomeColumns = []string{
		"call_id text", "session_id text", "seq bigint", "at timestamptz", "status text", "duration_ns bigint",
		"result_bytes bigint", "truncated boolean", "error text", "prev_hash bytea", "hash bytea",
	}
	egressColumns = []string{
		"id text", "session_id text", "seq bigint", "tool_call_id text", "at timestamptz", "kind text", "method text",
		"host text", "port integer", "resolved_ip text", "decision text", "reason text", "rule text", "bytes_up bigint",
		"bytes_down bigint", "duration_ns bigint", "error text", "trace_id text", "prev_hash bytea", "hash bytea",
	}
	llmColumns = []string{
		"id text", "session_id text", "seq bigint", "at timestamptz", "provider text", "model text", "path text",
		"stream boolean", "status_code integer", "input_tokens bigint", "output_tokens bigint", "cost_usd float8",
		"duration_ns bigint", "error text", "trace_id text", "prev_hash bytea", "hash bytea",
	}
	auditTables = []struct {
		name    string
		columns []string
	}{
		{"tool_calls", toolCallColumns},
		{"tool_call_outcomes", outcomeColumns},
		{"egress_events", egressColumns},
		{"llm_calls", llmColumns},
	}
)

// args returns the column arrays of the tables that have rows, in the order
// of auditTables, and the set of those tables as a bit mask (bit i: table i).
func (c *tableColumns) args() (args []any, mask int) {
	if d := &c.dec; len(d.callID) > 0 {
		mask |= 1 << 0
		args = append(args, d.callID, d.session, d.seq, d.at, d.server, d.tool, d.args, d.decision, d.rule, d.reason,
			d.shadowDecision, d.shadowRule, d.escalationID, d.detail, d.policyVersion, d.traceID, d.prev, d.hash)
	}
	if o := &c.out; len(o.callID) > 0 {
		mask |= 1 << 1
		args = append(args, o.callID, o.session, o.seq, o.at, o.status, o.durationNS, o.resultBytes, o.truncated,
			o.errText, o.prev, o.hash)
	}
	if g := &c.egr; len(g.id) > 0 {
		mask |= 1 << 2
		args = append(args, g.id, g.session, g.seq, g.toolCallID, g.at, g.kind, g.method, g.host, g.port, g.resolvedIP,
			g.decision, g.reason, g.rule, g.bytesUp, g.bytesDown, g.durationNS, g.errText, g.traceID, g.prev, g.hash)
	}
	if l := &c.llm; len(l.id) > 0 {
		mask |= 1 << 3
		args = append(args, l.id, l.session, l.seq, l.at, l.provider, l.model, l.path, l.stream, l.statusCode,
			l.inputTokens, l.outputTokens, l.cost, l.durationNS, l.errText, l.traceID, l.prev, l.hash)
	}
	return args, mask
}

// writeSQL[mask] writes a batch whose rows are in the tables of mask in one
// statement (one round trip, atomic). Its first five parameters are the
// batch's sessions (sorted) with, for each, the chain head the writer
// expects (old_seq, old_hash) and the head after the batch (seq, hash); the
// column arrays of tableColumns.args follow.
//
// It moves each session's head (creating the sessions row if needed) only
// if the head is still the expected one; the update locks the row, in id
// order, and re-checks the condition on the latest committed head, so two
// writers never extend a chain from the same head. Only the rows of the
// sessions whose head moved are inserted. It returns the ids of those
// sessions: a session missing from the result had its head moved by another
// writer, and none of its rows was written.
var writeSQL = func() (sqls [16]string) {
	for mask := range sqls {
		var b strings.Builder
		b.WriteString(`WITH v AS (
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::bigint[], $5::bytea[]) AS v(id, old_seq, old_hash, seq, hash)
), h AS (
  INSERT INTO sessions AS s (id, chain_seq, chain_hash) SELECT id, seq, hash FROM v ORDER BY id
  ON CONFLICT (id) DO UPDATE SET chain_seq = excluded.chain_seq, chain_hash = excluded.chain_hash, last_seen = now()
  WHERE (s.chain_seq, s.chain_hash) = (SELECT v.old_seq, v.old_hash FROM v WHERE v.id = s.id)
  RETURNING s.id
)`)
		n := 6
		for i, t := range auditTables {
			if mask&(1<<i) == 0 {
				continue
			}
			names := make([]string, len(t.columns))
			params := make([]string, len(t.columns))
			for j, col := range t.columns {
				name, typ, _ := strings.Cut(col, " ")
				names[j] = name
				params[j] = fmt.Sprintf("$%d::%s[]", n, typ)
				n++
			}
			fmt.Fprintf(&b, `, r%d AS (
  INSERT INTO %s (%s)
  SELECT r.* FROM unnest(%s) AS r(%s)
  WHERE r.session_id IN (SELECT id FROM h)
)`, i, t.name, strings.Join(names, ", "), strings.Join(params, ", "), strings.Join(names, ", "))
		}
		b.WriteString("\nSELECT id FROM h")
		sqls[mask] = b.String()
	}
	return sqls
}()

// traceIDColumn is the trace_id column of a record: the id when it is one
// (32 lowercase hex digits, as the tracer writes it), else empty. The
// column's check (migration 0009) must never fail a batch of audit rows
// over a link to telemetry.
func traceIDColumn(id string) string {
	if len(id) != 32 {
		return ""
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ""
		}
	}
	return id
}
