package audit

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
)

// chainHead is the position of a session's chain: the seq and hash of its
// latest record (0 and genesis before the first).
type chainHead struct {
	seq  int64
	hash []byte
}

// sessionsOf returns the sessions of batch, sorted: one lock order for
// every writer, so writers never deadlock on each other's session rows.
func sessionsOf(batch []*pending) []string {
	sessions := make([]string, 0, 4)
	seen := map[string]bool{}
	for _, p := range batch {
		if !seen[p.session] {
			seen[p.session] = true
			sessions = append(sessions, p.session)
		}
	}
	sort.Strings(sessions)
	return sessions
}

// chain gives every record of batch its position in its session's chain,
// after heads (the heads of sessions, advanced in place), and returns the
// statement that writes the batch with its arguments (see writeSQL).
func chain(batch []*pending, sessions []string, heads map[string]chainHead) (string, []any) {
	oldSeqs := make([]int64, len(sessions))
	oldHashes := make([][]byte, len(sessions))
	for i, id := range sessions {
		oldSeqs[i], oldHashes[i] = heads[id].seq, heads[id].hash
	}
	var cols tableColumns
	for _, p := range batch {
		kind, sess, fields := chainFields(p.ev)
		prev := heads[sess]
		p.seq = prev.seq + 1
		p.hash = chainHash(prev.hash, kind, sess, p.seq, fields)
		cols.add(p.ev, p.seq, prev.hash, p.hash)
		heads[sess] = chainHead{seq: p.seq, hash: p.hash}
	}
	seqs := make([]int64, len(sessions))
	hashes := make([][]byte, len(sessions))
	for i, id := range sessions {
		seqs[i], hashes[i] = heads[id].seq, heads[id].hash
	}
	cargs, mask := cols.args()
	return writeSQL[mask], append([]any{sessions, oldSeqs, oldHashes, seqs, hashes}, cargs...)
}

// writeCached writes batch in one statement (an implicit transaction: one
// round trip) from the flusher's cached heads, reading the heads it does
// not have first. It returns the records it wrote and the rest: on an error
// all of batch; else the records of the sessions whose head another writer
// moved (their cached heads are dropped).
func (s *PGSink) writeCached(ctx context.Context, f *flusher, batch []*pending) (written, rest []*pending, err error) {
	sessions := sessionsOf(batch)
	if err := s.loadHeads(ctx, f, sessions); err != nil {
		return nil, batch, notSent(err)
	}
	heads := make(map[string]chainHead, len(sessions))
	for _, id := range sessions {
		heads[id] = f.heads[id]
	}
	sql, args := chain(batch, sessions, heads)
	moved := make(map[string]bool, len(sessions))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, batch, fmt.Errorf("writing audit rows: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, batch, fmt.Errorf("writing audit rows: %w", err)
		}
		moved[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, batch, fmt.Errorf("writing audit rows: %w", err)
	}
	for _, id := range sessions {
		if moved[id] {
			f.remember(id, heads[id])
		} else {
			delete(f.heads, id)
		}
	}
	if len(moved) == len(sessions) {
		return batch, nil, nil
	}
	for _, p := range batch {
		if moved[p.session] {
			written = append(written, p)
		} else {
			rest = append(rest, p)
		}
	}
	return written, rest, nil
}

// loadHeads reads the heads of the sessions the flusher has not cached. A
// session without a row is at genesis (the write creates its row).
func (s *PGSink) loadHeads(ctx context.Context, f *flusher, sessions []string) error {
	var missing []string
	for _, id := range sessions {
		if _, ok := f.heads[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, chain_seq, chain_hash FROM sessions WHERE id = ANY($1::text[])`, missing)
	if err != nil {
		return fmt.Errorf("reading audit chain heads: %w", err)
	}
	found := make(map[string]chainHead, len(missing))
	for rows.Next() {
		var id string
		var h chainHead
		if err := rows.Scan(&id, &h.seq, &h.hash); err != nil {
			rows.Close()
			return fmt.Errorf("reading audit chain heads: %w", err)
		}
		found[id] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading audit chain heads: %w", err)
	}
	for _, id := range missing {
		h, ok := found[id]
		if !ok {
			h = chainHead{seq: 0, hash: genesis}
		}
		f.remember(id, h)
	}
	return nil
}

// writeBatch writes batch in one transaction that first locks (or creates)
// the sessions rows, in id order, and reads their heads: it does not depend
// on cached heads, so it succeeds whatever other writers do. Only its
// commit can fail with the rows written; every earlier error is notSent.
func (s *PGSink) writeBatch(ctx context.Context, batch []*pending) error {
	sessions := sessionsOf(batch)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return notSent(fmt.Errorf("beginning audit transaction: %w", err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	heads, err := lockHeads(ctx, tx, sessions)
	if err != nil {
		return notSent(err)
	}

	sql, args := chain(batch, sessions, heads)
	var moved int
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return notSent(fmt.Errorf("inserting audit rows: %w", err))
	}
	for rows.Next() {
		moved++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return notSent(fmt.Errorf("inserting audit rows: %w", err))
	}
	if moved != len(sessions) {
		return notSent(fmt.Errorf("inserting audit rows: %d of %d locked chain heads moved", moved, len(sessions)))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing audit rows: %w", err)
	}
	return nil
}

// lockHeads inserts or locks the sessions rows, in the order given (sorted
// by every writer, so writers never deadlock), and returns their chain
// heads. ON CONFLICT DO UPDATE takes the row lock.
func lockHeads(ctx context.Context, tx pgx.Tx, sessions []string) (map[string]chainHead, error) {
	rows, err := tx.Query(ctx, `
INSERT INTO sessions AS s (id) SELECT unnest($1::text[]) ORDER BY 1
ON CONFLICT (id) DO UPDATE SET last_seen = now()
RETURNING s.id, s.chain_seq, s.chain_hash`, sessions)
	if err != nil {
		return nil, fmt.Errorf("locking audit sessions: %w", err)
	}
	heads := make(map[string]chainHead, len(sessions))
	for rows.Next() {
		var id string
		var h chainHead
		if err := rows.Scan(&id, &h.seq, &h.hash); err != nil {
			rows.Close()
			return nil, fmt.Errorf("locking audit sessions: %w", err)
		}
		heads[id] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("locking audit sessions: %w", err)
	}
	for _, id := range sessions {
		if _, ok := heads[id]; !ok {
			return nil, fmt.Errorf("locking audit sessions: session %q missing", id)
		}
	}
	return heads, nil
}
