package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"
)

// HashSize is the size of a chain hash (SHA-256).
const HashSize = sha256.Size

// chainDomain separates this hash from any other use of SHA-256.
const chainDomain = "ironcurtain-audit-chain-v1"

// Every session has one hash chain across all audit tables: record n stores
// seq = n, prev_hash = hash of record n-1 (32 zero bytes for n = 1) and
//
//	hash = SHA-256(chainDomain || prev_hash || enc(kind) || enc(session) ||
//	               enc(seq) || enc(field_1) || ... || enc(field_k))
//
// where enc(s) is the 4-byte big-endian length of s followed by s, and the
// fields are the record's stored columns in a fixed order, formatted as in
// chainFields. Length prefixes make the encoding unambiguous; the kind keeps
// a record of one table from passing for one of another.

// genesis is prev_hash of a session's first record.
var genesis = make([]byte, HashSize)

// chainHash computes the hash of one record.
func chainHash(prev []byte, kind, session string, seq int64, fields []string) []byte {
	h := sha256.New()
	h.Write([]byte(chainDomain))
	h.Write(prev)
	var lenBuf [4]byte
	put := func(s string) {
		binary.BigEndian.PutUint32(lenBuf[:], uint32(len(s)))
		h.Write(lenBuf[:])
		h.Write([]byte(s))
	}
	put(kind)
	put(session)
	put(strconv.FormatInt(seq, 10))
	for _, f := range fields {
		put(f)
	}
	return h.Sum(nil)
}

// chainTime is the canonical form of a timestamp: UTC, microseconds (what
// timestamptz stores), RFC 3339.
func chainTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

// normalizeTime is applied before a record is hashed and stored, so that
// what Postgres gives back hashes the same.
func normalizeTime(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

func fmtBool(b bool) string {
	if b {
		return "t"
	}
	return "f"
}

// chainFields returns a record's kind, session and fields in hash order.
// The event must already be redacted and normalised: these are exactly the
// values stored.
func chainFields(e Event) (kind, session string, fields []string) {
	switch x := e.(type) {
	case *ToolCallDecision:
		fields := []string{
			x.CallID, chainTime(x.Time), x.Server, x.Tool, string(x.Args), x.Decision, x.Rule, x.Reason,
			x.ShadowDecision, x.ShadowRule, x.EscalationID, x.Detail,
		}
		// The policy version (migration 0007) is hashed only when set, so
		// records written before it verify as they were written; a set
		// version cannot be blanked without breaking the link (the field
		// count is part of the hashed encoding).
		if x.PolicyVersion != "" {
			fields = append(fields, x.PolicyVersion)
		}
		return TypeToolCallDecision, x.SessionID, fields
	case *ToolCallOutcome:
		return TypeToolCallOutcome, x.SessionID, []string{
			x.CallID, chainTime(x.Time), x.Status, strconv.FormatInt(int64(x.Duration), 10),
			strconv.Itoa(x.ResultBytes), fmtBool(x.Truncated), x.Error,
		}
	case *EgressEvent:
		return TypeEgress, x.SessionID, []string{
			x.ID, x.ToolCallID, chainTime(x.Time), x.Kind, x.Method, x.Host, strconv.Itoa(x.Port), x.ResolvedIP,
			x.Decision, x.Reason, x.Rule, strconv.FormatInt(x.BytesUp, 10), strconv.FormatInt(x.BytesDown, 10),
			strconv.FormatInt(int64(x.Duration), 10), x.Error,
		}
	case *LLMCall:
		return TypeLLMCall, x.SessionID, []string{
			x.ID, chainTime(x.Time), x.Provider, x.Model, x.Path, fmtBool(x.Stream), strconv.Itoa(x.StatusCode),
			strconv.FormatInt(x.InputTokens, 10), strconv.FormatInt(x.OutputTokens, 10),
			strconv.FormatFloat(x.CostUSD, 'g', -1, 64), strconv.FormatInt(int64(x.Duration), 10), x.Error,
		}
	}
	return "", "", nil
}
