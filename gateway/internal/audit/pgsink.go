package audit

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	DefaultMaxBatch  = 512
	DefaultQueueSize = 4096
	DefaultFlushers  = 2
)

// Options tunes the Postgres sink. The zero value uses the defaults.
type Options struct {
	// MaxBatch caps the records written in one transaction.
	MaxBatch int
	// QueueSize caps the records waiting for a flusher. When it is full,
	// Record blocks until there is room or its context ends (then it fails:
	// nothing is dropped silently).
	QueueSize int
	// Linger is how long a flusher waits for more records after the first
	// one when the batch is not full. 0 (the default) flushes at once:
	// records that arrive while a transaction commits form the next batch,
	// which is what groups concurrent calls without adding latency.
	Linger time.Duration
	// Flushers is the number of transactions in flight at once.
	Flushers int
}

func (o Options) withDefaults() Options {
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Flushers <= 0 {
		o.Flushers = DefaultFlushers
	}
	return o
}

// Errors of the Postgres sink (wrapped; test with errors.Is).
var (
	ErrClosed     = errors.New("audit sink is closed")
	ErrQueueFull  = errors.New("audit queue is full")
	ErrInvalid    = errors.New("invalid audit event")
	ErrNotWritten = errors.New("audit record was not written")
)

// PGSink writes audit events to Postgres with group commit: concurrent
// Records are queued (bounded) and written by a few flushers, many per
// transaction, and each Record returns only after the transaction holding
// its row committed (write-ahead: a decision is durable before the action
// runs). Every row extends its session's hash chain; the chain head lives in
// the sessions row, and a transaction moves it only from the head the rows
// were chained to, holding the row lock, so the chain stays linear under
// concurrency and across gateway replicas sharing the database.
//
// Each flusher keeps the heads of its sessions in memory and writes a batch
// in one statement that moves each head only if it is still the cached one
// (one round trip). The records of a session whose head another replica
// moved are not written by it; they are written next in a transaction that
// locks the session row and reads the head first (see writeBatch).
type PGSink struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger
	m    *sinkMetrics
	// queues holds one bounded queue per flusher. A session's records always
	// go to the same flusher (hash of the session id), so flushers never wait
	// for each other's session-row locks and a session's records keep their
	// order.
	queues []chan *pending

	mu     sync.RWMutex // guards closed against sends on queue
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

var _ Sink = (*PGSink)(nil)

type pending struct {
	ev      Event // redacted, normalised
	typ     string
	session string     // the hash chain it extends
	done    chan error // buffered: the flusher never blocks on it
	// seq and hash are the record's chain position in the latest write
	// attempt (the session's head once that attempt committed).
	seq  int64
	hash []byte
}

// flusher is the state of one flush loop.
type flusher struct {
	queue chan *pending
	// heads caches the chain heads of the flusher's sessions as this
	// flusher last wrote or read them. Another replica may have moved a
	// head since: writes check it (see writeSQL).
	heads map[string]chainHead
}

// maxCachedHeads bounds a flusher's head cache; past it, an arbitrary head
// is forgotten (and read again when its session writes).
const maxCachedHeads = 4096

func (f *flusher) remember(session string, h chainHead) {
	if _, ok := f.heads[session]; !ok && len(f.heads) >= maxCachedHeads {
		for id := range f.heads {
			delete(f.heads, id)
			break
		}
	}
	f.heads[session] = h
}

// NewPG starts a Postgres sink on pool. reg receives the sink's metrics
// (nil: not registered); log receives flush failures (nil: discarded).
// Close stops it.
func NewPG(pool *pgxpool.Pool, opts Options, reg prometheus.Registerer, log *slog.Logger) (*PGSink, error) {
	if pool == nil {
		return nil, errors.New("creating audit sink: nil pool")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	s := &PGSink{
		pool: pool,
		opts: opts,
		log:  log,
		stop: make(chan struct{}),
	}
	per := max(1, opts.QueueSize/opts.Flushers)
	for range opts.Flushers {
		s.queues = append(s.queues, make(chan *pending, per))
	}
	m, err := newSinkMetrics(reg, func() float64 {
		n := 0
		for _, q := range s.queues {
			n += len(q)
		}
		return float64(n)
	})
	if err != nil {
		return nil, fmt.Errorf("creating audit sink: %w", err)
	}
	s.m = m
	for _, q := range s.queues {
		s.wg.Add(1)
		go s.flushLoop(&flusher{queue: q, heads: map[string]chainHead{}})
	}
	return s, nil
}

// queueFor returns the queue of the flusher that owns session.
func (s *PGSink) queueFor(session string) chan *pending {
	h := fnv.New32a()
	_, _ = h.Write([]byte(session))
	return s.queues[h.Sum32()%uint32(len(s.queues))]
}

// Record implements Sink: it returns nil only once the event is committed.
func (s *PGSink) Record(ctx context.Context, e Event) error {
	start := time.Now()
	p, err := s.prepare(e)
	if err != nil {
		s.m.failures.WithLabelValues("invalid").Inc()
		return fmt.Errorf("recording audit event: %w", err)
	}
	if err := s.enqueue(ctx, p); err != nil {
		return fmt.Errorf("recording audit event: %w", err)
	}
	select {
	case err := <-p.done:
		s.m.recordSeconds.Observe(time.Since(start).Seconds())
		if err != nil {
			s.m.records.WithLabelValues(p.typ, "error").Inc()
			return fmt.Errorf("recording audit event: %w", err)
		}
		s.m.records.WithLabelValues(p.typ, "ok").Inc()
		return nil
	case <-ctx.Done():
		// The row may still commit; the caller must act as if it did not.
		s.m.failures.WithLabelValues("timeout").Inc()
		return fmt.Errorf("recording audit event: %w: %w", ErrNotWritten, ctx.Err())
	}
}

func (s *PGSink) enqueue(ctx context.Context, p *pending) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.m.failures.WithLabelValues("closed").Inc()
		return ErrClosed
	}
	q := s.queueFor(p.session)
	select {
	case q <- p:
		return nil
	default:
	}
	s.m.queueFullWaits.Inc()
	select {
	case q <- p:
		return nil
	case <-ctx.Done():
		s.m.failures.WithLabelValues("queue_full").Inc()
		return fmt.Errorf("%w: %w", ErrQueueFull, ctx.Err())
	}
}

// prepare validates, redacts and normalises an event.
func (s *PGSink) prepare(e Event) (*pending, error) {
	typ, err := eventType(e)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	r := RedactEvent(e)
	switch x := r.(type) {
	case *ToolCallDecision:
		if x.CallID == "" {
			return nil, fmt.Errorf("%w: decision without call id", ErrInvalid)
		}
		x.Time = normalizeTime(x.Time)
	case *ToolCallOutcome:
		if x.CallID == "" {
			return nil, fmt.Errorf("%w: outcome without call id", ErrInvalid)
		}
		x.Time = normalizeTime(x.Time)
	case *EgressEvent:
		if x.ID == "" {
			x.ID = uuid.NewString()
		}
		x.Time = normalizeTime(x.Time)
	case *LLMCall:
		if x.ID == "" {
			x.ID = uuid.NewString()
		}
		x.Time = normalizeTime(x.Time)
	}
	_, session, _ := chainFields(r)
	return &pending{ev: r, typ: typ, session: session, done: make(chan error, 1)}, nil
}

// Close stops accepting records, writes what is queued and returns when the
// flushers are done. Records after Close fail with ErrClosed.
func (s *PGSink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *PGSink) flushLoop(f *flusher) {
	defer s.wg.Done()
	queue := f.queue
	batch := make([]*pending, 0, s.opts.MaxBatch)
	for {
		var first *pending
		select {
		case first = <-queue:
		case <-s.stop:
			// Drain: nothing queued is dropped.
			for {
				select {
				case p := <-queue:
					s.flush(f, s.fill(queue, append(batch[:0], p)))
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		batch = s.fill(queue, batch)
		s.flush(f, batch)
	}
}

// fill adds queued records to batch without waiting, then lingers for
// Options.Linger if the batch is still not full.
func (s *PGSink) fill(queue chan *pending, batch []*pending) []*pending {
	for len(batch) < s.opts.MaxBatch {
		select {
		case p := <-queue:
			batch = append(batch, p)
			continue
		default:
		}
		break
	}
	if s.opts.Linger <= 0 || len(batch) >= s.opts.MaxBatch {
		return batch
	}
	timer := time.NewTimer(s.opts.Linger)
	defer timer.Stop()
	for len(batch) < s.opts.MaxBatch {
		select {
		case p := <-queue:
			batch = append(batch, p)
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// flushTimeout bounds one transaction, so a hung database fails records
// instead of holding callers until their own deadlines.
const flushTimeout = 30 * time.Second

// flush writes batch and reports to every record. A batch that fails on a
// data or constraint error is retried record by record, so one bad record
// fails alone.
func (s *PGSink) flush(f *flusher, batch []*pending) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	start := time.Now()
	written, rest, err := s.writeCached(ctx, f, batch)
	if err == nil && len(rest) > 0 {
		// Another writer moved some of the heads: write those records in
		// a transaction that locks the sessions rows and reads the heads.
		s.m.retries.Inc()
		err = s.writeWithRetry(ctx, rest)
		if err == nil {
			for _, p := range rest {
				f.remember(p.session, chainHead{seq: p.seq, hash: p.hash})
			}
		}
	}
	if err != nil {
		// The heads of the failed records are unknown (the commit may or
		// may not have happened): read them again next time.
		for _, p := range rest {
			delete(f.heads, p.session)
		}
	}
	s.m.commitSeconds.Observe(time.Since(start).Seconds())
	s.m.batchSize.Observe(float64(len(batch)))
	if err == nil {
		for _, p := range batch {
			p.done <- nil
		}
		return
	}
	for _, p := range written {
		p.done <- nil
	}
	if len(rest) > 1 && isDataError(err) {
		for _, p := range rest {
			s.flush(f, []*pending{p})
		}
		return
	}
	s.m.failures.WithLabelValues(failureReason(err)).Add(float64(len(rest)))
	s.log.Error("audit batch not written", "records", len(rest), "err", err)
	for _, p := range rest {
		p.done <- err
	}
}

func (s *PGSink) writeWithRetry(ctx context.Context, batch []*pending) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = s.writeBatch(ctx, batch)
		if err == nil || !isRetryable(err) {
			return err
		}
		s.m.retries.Inc()
	}
	return err
}

func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return len(pgErr.Code) == 5 && (pgErr.Code[:2] == "22" || pgErr.Code[:2] == "23")
	}
	return false
}

func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

func failureReason(err error) string {
	switch {
	case isDataError(err):
		return "rejected"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "db"
	}
}

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
		return nil, batch, err
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
// on cached heads, so it succeeds whatever other writers do.
func (s *PGSink) writeBatch(ctx context.Context, batch []*pending) error {
	sessions := sessionsOf(batch)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning audit transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// Insert-or-lock every session row and read its chain head. ON CONFLICT
	// DO UPDATE takes the row lock, in the ORDER BY order.
	rows, err := tx.Query(ctx, `
INSERT INTO sessions AS s (id) SELECT unnest($1::text[]) ORDER BY 1
ON CONFLICT (id) DO UPDATE SET last_seen = now()
RETURNING s.id, s.chain_seq, s.chain_hash`, sessions)
	if err != nil {
		return fmt.Errorf("locking audit sessions: %w", err)
	}
	heads := make(map[string]chainHead, len(sessions))
	for rows.Next() {
		var id string
		var h chainHead
		if err := rows.Scan(&id, &h.seq, &h.hash); err != nil {
			rows.Close()
			return fmt.Errorf("locking audit sessions: %w", err)
		}
		heads[id] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("locking audit sessions: %w", err)
	}
	for _, id := range sessions {
		if _, ok := heads[id]; !ok {
			return fmt.Errorf("locking audit sessions: session %q missing", id)
		}
	}

	sql, args := chain(batch, sessions, heads)
	var moved int
	rows, err = tx.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("inserting audit rows: %w", err)
	}
	for rows.Next() {
		moved++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inserting audit rows: %w", err)
	}
	if moved != len(sessions) {
		return fmt.Errorf("inserting audit rows: %d of %d locked chain heads moved", moved, len(sessions))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing audit rows: %w", err)
	}
	return nil
}
