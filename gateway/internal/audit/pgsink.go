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
	"github.com/jackc/pgx/v5"
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
// the sessions row, which the transaction locks, so the chain stays linear
// under concurrency and across gateway replicas sharing the database.
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
		go s.flushLoop(q)
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

func (s *PGSink) flushLoop(queue chan *pending) {
	defer s.wg.Done()
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
					s.flush(s.fill(queue, append(batch[:0], p)))
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		batch = s.fill(queue, batch)
		s.flush(batch)
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
func (s *PGSink) flush(batch []*pending) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	start := time.Now()
	err := s.writeWithRetry(ctx, batch)
	s.m.commitSeconds.Observe(time.Since(start).Seconds())
	s.m.batchSize.Observe(float64(len(batch)))
	if err != nil && len(batch) > 1 && isDataError(err) {
		for _, p := range batch {
			s.flush([]*pending{p})
		}
		return
	}
	if err != nil {
		s.m.failures.WithLabelValues(failureReason(err)).Add(float64(len(batch)))
		s.log.Error("audit batch not written", "records", len(batch), "err", err)
	}
	for _, p := range batch {
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

// chainHead is a session's chain position while a batch is built.
type chainHead struct {
	seq  int64
	hash []byte
}

// writeBatch writes batch in one transaction: lock (or create) the sessions
// rows in id order, extend each chain, insert the rows, move the heads.
func (s *PGSink) writeBatch(ctx context.Context, batch []*pending) error {
	sessions := make([]string, 0, 4)
	seen := map[string]bool{}
	for _, p := range batch {
		_, sess, _ := chainFields(p.ev)
		if !seen[sess] {
			seen[sess] = true
			sessions = append(sessions, sess)
		}
	}
	sort.Strings(sessions) // one lock order for every writer: no deadlocks

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
	heads := make(map[string]*chainHead, len(sessions))
	for rows.Next() {
		var id string
		h := &chainHead{}
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

	var cols tableColumns
	for _, p := range batch {
		kind, sess, fields := chainFields(p.ev)
		h := heads[sess]
		if h == nil {
			return fmt.Errorf("locking audit sessions: session %q missing", sess)
		}
		prev := h.hash
		h.seq++
		h.hash = chainHash(prev, kind, sess, h.seq, fields)
		cols.add(p.ev, h.seq, prev, h.hash)
	}

	b := &pgx.Batch{}
	cols.queue(b)
	ids := make([]string, 0, len(heads))
	seqs := make([]int64, 0, len(heads))
	hashes := make([][]byte, 0, len(heads))
	for _, id := range sessions {
		ids, seqs, hashes = append(ids, id), append(seqs, heads[id].seq), append(hashes, heads[id].hash)
	}
	b.Queue(`
UPDATE sessions SET chain_seq = v.seq, chain_hash = v.hash, last_seen = now()
FROM unnest($1::text[], $2::bigint[], $3::bytea[]) AS v(id, seq, hash)
WHERE sessions.id = v.id`, ids, seqs, hashes)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("inserting audit rows: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing audit rows: %w", err)
	}
	return nil
}
