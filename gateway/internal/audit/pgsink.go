package audit

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
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
	// ArgLimits bounds the stored arguments of tool-call decisions.
	ArgLimits Limits
	// Spool keeps the outcomes that cannot be written while the database
	// is down or slow, and writes them when it is back (pgsink_spool.go).
	// nil: no spool (an outcome that fails is an error for the caller).
	// With a spool, every decision recorded must be followed by its
	// outcome (the MCP hub records one on every path).
	Spool *Spool
	// OutcomeWait bounds how long Record waits for an outcome's commit
	// before it spools the outcome and returns (only with a Spool).
	OutcomeWait time.Duration
	// Now and Rand drive the reconnect back-off (tests; nil: the clock and
	// math/rand).
	Now  func() time.Time
	Rand func() float64
}

// DefaultOutcomeWait is Options.OutcomeWait when zero.
const DefaultOutcomeWait = time.Second

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
	if o.OutcomeWait <= 0 {
		o.OutcomeWait = DefaultOutcomeWait
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

	// gate stops writes from reconnecting in a storm while the database is
	// unreachable; failing summarises their failures in the log.
	gate    *gate
	failing *FailureSummary
	// lastFail is the last failure to write (classified by
	// store.Classify when it can be), nil after a successful write.
	lastFail atomic.Pointer[writeFailure]
	// spoolFull summarises calls refused because the spool is full;
	// calls remembers how each call's decision write ended until its
	// outcome is recorded; kick wakes the replayer (pgsink_spool.go).
	spoolFull *FailureSummary
	calls     callStates
	kick      chan struct{}
	// missing notes when the replayer first found the decision of an
	// unconfirmed spool entry missing (replayer goroutine only).
	missing map[uint64]time.Time
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
		pool:      pool,
		opts:      opts,
		log:       log,
		stop:      make(chan struct{}),
		gate:      newGate(opts.Now, opts.Rand),
		kick:      make(chan struct{}, 1),
		missing:   map[uint64]time.Time{},
		calls:     callStates{m: map[string]callState{}},
		failing:   NewFailureSummary(log, "audit writes", "records not written", DefaultSummaryEvery, opts.Now),
		spoolFull: NewFailureSummary(log, "audit spool full", "calls refused to keep the spool from overflowing", DefaultSummaryEvery, opts.Now),
	}
	per := max(1, opts.QueueSize/opts.Flushers)
	for range opts.Flushers {
		s.queues = append(s.queues, make(chan *pending, per))
	}
	m, err := newSinkMetrics(reg, s.gauges())
	if err != nil {
		return nil, fmt.Errorf("creating audit sink: %w", err)
	}
	s.m = m
	for _, q := range s.queues {
		s.wg.Add(1)
		go s.flushLoop(&flusher{queue: q, heads: map[string]chainHead{}})
	}
	if opts.Spool != nil {
		if n := opts.Spool.Len(); n > 0 {
			log.Warn("audit spool holds outcomes from an earlier outage; writing them", "records", n)
		}
		s.wg.Add(1)
		go s.replayLoop()
	}
	return s, nil
}

// queueFor returns the queue of the flusher that owns session.
func (s *PGSink) queueFor(session string) chan *pending {
	h := fnv.New32a()
	_, _ = h.Write([]byte(session))
	return s.queues[h.Sum32()%uint32(len(s.queues))]
}

// Record implements Sink: it returns nil only once the event is committed,
// or, for an outcome with a Spool, committed or spooled (see recordOutcome).
func (s *PGSink) Record(ctx context.Context, e Event) error {
	start := time.Now()
	p, err := s.prepare(e)
	if err != nil {
		s.m.failures.WithLabelValues("invalid").Inc()
		return fmt.Errorf("recording audit event: %w", err)
	}
	if s.opts.Spool != nil {
		switch x := p.ev.(type) {
		case *ToolCallDecision:
			return s.recordDecision(ctx, p, x, start)
		case *ToolCallOutcome:
			return s.recordOutcome(ctx, p, x, start)
		}
	}
	return s.commit(ctx, p, start)
}

// commit queues p and waits until its transaction ended or ctx did.
func (s *PGSink) commit(ctx context.Context, p *pending, start time.Time) error {
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
	r := StoredEvent(e, s.opts.ArgLimits)
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
