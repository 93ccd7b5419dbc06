package audit

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// tableColumns gathers a batch's rows column by column, so each table gets
// one INSERT ... SELECT FROM unnest(...) whatever the batch size.
type tableColumns struct {
	dec struct {
		callID, session                                  []string
		seq                                              []int64
		at                                               []time.Time
		server, tool, args, decision, rule, reason       []string
		shadowDecision, shadowRule, escalationID, detail []string
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
		seq, bytesUp, bytesDown, durationNS                                                      []int64
		port                                                                                     []int32
		at                                                                                       []time.Time
		prev, hash                                                                               [][]byte
	}
	llm struct {
		id, session, provider, model, path, errText []string
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
		g.prev, g.hash = append(g.prev, prev), append(g.hash, hash)
	case *LLMCall:
		l := &c.llm
		l.id, l.session, l.seq, l.at = append(l.id, x.ID), append(l.session, x.SessionID), append(l.seq, seq), append(l.at, x.Time)
		l.provider, l.model, l.path, l.stream = append(l.provider, x.Provider), append(l.model, x.Model), append(l.path, x.Path), append(l.stream, x.Stream)
		l.statusCode, l.inputTokens, l.outputTokens = append(l.statusCode, int32(x.StatusCode)), append(l.inputTokens, x.InputTokens), append(l.outputTokens, x.OutputTokens)
		l.cost, l.durationNS, l.errText = append(l.cost, x.CostUSD), append(l.durationNS, int64(x.Duration)), append(l.errText, x.Error)
		l.prev, l.hash = append(l.prev, prev), append(l.hash, hash)
	}
}

// queue adds one INSERT per table that has rows.
func (c *tableColumns) queue(b *pgx.Batch) {
	if d := &c.dec; len(d.callID) > 0 {
		b.Queue(`
INSERT INTO tool_calls (call_id, session_id, seq, at, server, tool, args, decision, rule, reason,
                        shadow_decision, shadow_rule, escalation_id, detail, prev_hash, hash)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[], $7::text[],
                     $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                     $15::bytea[], $16::bytea[])`,
			d.callID, d.session, d.seq, d.at, d.server, d.tool, d.args, d.decision, d.rule, d.reason,
			d.shadowDecision, d.shadowRule, d.escalationID, d.detail, d.prev, d.hash)
	}
	if o := &c.out; len(o.callID) > 0 {
		b.Queue(`
INSERT INTO tool_call_outcomes (call_id, session_id, seq, at, status, duration_ns, result_bytes, truncated, error, prev_hash, hash)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::text[], $6::bigint[], $7::bigint[],
                     $8::boolean[], $9::text[], $10::bytea[], $11::bytea[])`,
			o.callID, o.session, o.seq, o.at, o.status, o.durationNS, o.resultBytes, o.truncated, o.errText, o.prev, o.hash)
	}
	if g := &c.egr; len(g.id) > 0 {
		b.Queue(`
INSERT INTO egress_events (id, session_id, seq, tool_call_id, at, kind, method, host, port, resolved_ip, decision, reason,
                           rule, bytes_up, bytes_down, duration_ns, error, prev_hash, hash)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::text[],
                     $9::integer[], $10::text[], $11::text[], $12::text[], $13::text[], $14::bigint[], $15::bigint[],
                     $16::bigint[], $17::text[], $18::bytea[], $19::bytea[])`,
			g.id, g.session, g.seq, g.toolCallID, g.at, g.kind, g.method, g.host, g.port, g.resolvedIP, g.decision, g.reason,
			g.rule, g.bytesUp, g.bytesDown, g.durationNS, g.errText, g.prev, g.hash)
	}
	if l := &c.llm; len(l.id) > 0 {
		b.Queue(`
INSERT INTO llm_calls (id, session_id, seq, at, provider, model, path, stream, status_code, input_tokens, output_tokens,
                       cost_usd, duration_ns, error, prev_hash, hash)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[], $7::text[],
                     $8::boolean[], $9::integer[], $10::bigint[], $11::bigint[], $12::float8[], $13::bigint[],
                     $14::text[], $15::bytea[], $16::bytea[])`,
			l.id, l.session, l.seq, l.at, l.provider, l.model, l.path, l.stream, l.statusCode, l.inputTokens, l.outputTokens,
			l.cost, l.durationNS, l.errText, l.prev, l.hash)
	}
}
