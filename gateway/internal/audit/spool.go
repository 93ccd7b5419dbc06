package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The spool keeps tool-call outcomes that could not be written to Postgres
// (the database was down, paused or slow) until they can be: a file of
// lines, one record each, appended and fsynced before the caller is told
// the record is kept, and rewritten (a new file renamed over the old one)
// when records leave it. Each line is
//
//	<crc32c of the rest, 8 hex digits> <HMAC-SHA256 of the JSON, 64 hex digits> <JSON of spoolEntry>\n
//
// A last line cut short by a crash (no newline, or a checksum that does not
// match) is dropped when the spool is opened: its append never returned. A
// bad line anywhere else is corruption, and opening fails.
//
// The MAC proves the gateway wrote the line: anything else that can write
// the file (a process the gateway started, running as its user) can compute
// a checksum but not the MAC, whose key it cannot read. A line with a good
// checksum and a MAC that does not verify is refused: it is never replayed,
// it is moved to outcomes.spool.rejected for the operator, and counted
// (Spool.Rejected). The key is the gateway's own, generated at start and
// kept only in memory (ProcessSpoolKey), unless the operator gives a key
// file (audit.spool_key_file); with the in-memory key, lines left by an
// earlier run of the gateway cannot be verified and are refused the same
// way, so a restart after a database outage needs the key file for the
// spooled outcomes to be replayed.

// Defaults of the spool.
const (
	DefaultSpoolMaxRecords = 100_000
	spoolFile              = "outcomes.spool"
	spoolRejectedFile      = "outcomes.spool.rejected"
	spoolMACHex            = 2 * sha256.Size
	// SpoolKeySize is the size of a spool key.
	SpoolKeySize = 32
)

// ErrSpoolMAC marks a spool line whose MAC does not verify: the gateway did
// not write it (or wrote it with another key).
var ErrSpoolMAC = errors.New("audit spool line not written by this gateway (its MAC does not verify)")

var (
	processKeyOnce sync.Once
	processKey     []byte
)

// ProcessSpoolKey returns the spool key of this process: random, generated
// at first use, kept only in memory (the gateway is non-dumpable, so its
// children cannot read it).
func ProcessSpoolKey() []byte {
	processKeyOnce.Do(func() {
		processKey = make([]byte, SpoolKeySize)
		if _, err := rand.Read(processKey); err != nil {
			panic("audit: no randomness for the spool key: " + err.Error())
		}
	})
	return processKey
}

// ErrSpoolFull refuses a new call: the spool has no room left for the
// outcome the call would need to keep if the database failed.
var ErrSpoolFull = errors.New("audit spool is full")

// Kinds of spool entries.
const (
	// spoolOutcome is an outcome whose decision row was committed.
	spoolOutcome = "outcome"
	// spoolUnconfirmed is the outcome of a call refused because its
	// decision commit was ambiguous (the connection died during it). When
	// replayed, the decision row is read by call id: if it exists the
	// outcome is written (refused, UnconfirmedDecision); if not, nothing
	// is (the call left no record and did not run).
	spoolUnconfirmed = "unconfirmed"
)

// UnconfirmedDecision is the error text of the outcome of a call whose
// decision row turned out to be committed although the gateway could not
// confirm it in time.
const UnconfirmedDecision = "decided, refused because the decision could not be confirmed, did not run"

// spoolEntry is one line of the spool.
type spoolEntry struct {
	ID       uint64           `json:"id"`
	Kind     string           `json:"kind"`
	Spooled  time.Time        `json:"spooled_at"`
	Outcome  *ToolCallOutcome `json:"outcome"`
	rawBytes int
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Spool is the bounded, fsynced file of outcomes waiting for the database.
// Room is reserved when a call's decision is recorded and used or released
// with its outcome, so an outcome never finds the spool full: new calls
// are refused first.
type Spool struct {
	path     string
	max      int
	key      []byte
	rejected int

	mu       sync.Mutex
	f        *os.File
	entries  []spoolEntry
	nextID   uint64
	reserved int
	bytes    int64
}

// OpenSpool opens (creating it if needed) the spool in dir, holding at
// most maxRecords entries (0: DefaultSpoolMaxRecords), with the process's
// in-memory key (ProcessSpoolKey). It returns the number of bytes of a torn
// last line it dropped.
func OpenSpool(dir string, maxRecords int) (*Spool, int, error) {
	return OpenSpoolKey(dir, maxRecords, ProcessSpoolKey())
}

// OpenSpoolKey is OpenSpool with the MAC key given (SpoolKeySize bytes or
// more). Lines whose MAC does not verify are refused: moved to
// outcomes.spool.rejected and counted in Rejected.
func OpenSpoolKey(dir string, maxRecords int, key []byte) (*Spool, int, error) {
	if maxRecords <= 0 {
		maxRecords = DefaultSpoolMaxRecords
	}
	if len(key) < SpoolKeySize {
		return nil, 0, fmt.Errorf("opening audit spool: the key has %d bytes, want at least %d", len(key), SpoolKeySize)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("opening audit spool: %w", err)
	}
	s := &Spool{path: filepath.Join(dir, spoolFile), max: maxRecords, nextID: 1, key: bytes.Clone(key)}
	data, err := os.ReadFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("opening audit spool: %w", err)
	}
	entries, rejected, good, err := parseSpool(data, s.key)
	if err != nil {
		return nil, 0, fmt.Errorf("opening audit spool %s: %w", s.path, err)
	}
	if len(rejected) > 0 {
		if err := s.quarantine(rejected); err != nil {
			return nil, 0, err
		}
		s.rejected = len(rejected)
	}
	s.entries = entries
	for _, e := range entries {
		s.nextID = max(s.nextID, e.ID+1)
		s.bytes += int64(e.rawBytes)
	}
	torn := len(data) - good
	if torn > 0 || len(rejected) > 0 {
		if err := s.rewrite(entries); err != nil {
			return nil, 0, err
		}
	} else if err := s.reopen(); err != nil {
		return nil, 0, err
	}
	return s, torn, nil
}

// parseSpool parses the spool's lines. It returns the entries, the lines
// refused because their MAC does not verify (whole, with their newline),
// and the length of the prefix of data they came from; a torn last line is
// left out, any other bad line is an error.
func parseSpool(data, key []byte) ([]spoolEntry, [][]byte, int, error) {
	var entries []spoolEntry
	var rejected [][]byte
	off := 0
	for line := 1; off < len(data); line++ {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return entries, rejected, off, nil // torn: the append never finished
		}
		e, err := parseSpoolLine(data[off:off+nl], key)
		switch {
		case errors.Is(err, ErrSpoolMAC):
			rejected = append(rejected, data[off:off+nl+1])
		case err != nil:
			if off+nl+1 == len(data) {
				return entries, rejected, off, nil // a torn last line that happens to end in '\n'
			}
			return nil, nil, 0, fmt.Errorf("line %d: %w", line, err)
		default:
			e.rawBytes = nl + 1
			entries = append(entries, e)
		}
		off += nl + 1
	}
	return entries, rejected, off, nil
}

func parseSpoolLine(b, key []byte) (spoolEntry, error) {
	var e spoolEntry
	if len(b) < 10 || b[8] != ' ' {
		return e, errors.New("no checksum")
	}
	var sum [4]byte
	if _, err := hex.Decode(sum[:], b[:8]); err != nil {
		return e, errors.New("bad checksum")
	}
	want := uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])
	if crc32.Checksum(b[9:], castagnoli) != want {
		return e, errors.New("checksum mismatch")
	}
	// A whole line without a MAC (written by another writer, or by a
	// gateway from before MACs) is not provably the gateway's.
	if len(b) < 9+spoolMACHex+2 || b[9+spoolMACHex] != ' ' {
		return e, ErrSpoolMAC
	}
	var mac [sha256.Size]byte
	if _, err := hex.Decode(mac[:], b[9:9+spoolMACHex]); err != nil {
		return e, ErrSpoolMAC
	}
	body := b[9+spoolMACHex+1:]
	if !hmac.Equal(mac[:], spoolMAC(key, body)) {
		return e, ErrSpoolMAC
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return e, fmt.Errorf("decoding: %w", err)
	}
	if e.ID == 0 || e.Outcome == nil || e.Outcome.CallID == "" || (e.Kind != spoolOutcome && e.Kind != spoolUnconfirmed) {
		return e, errors.New("incomplete entry")
	}
	return e, nil
}

func encodeSpoolLine(e spoolEntry, key []byte) ([]byte, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encoding audit spool entry: %w", err)
	}
	rest := make([]byte, 0, spoolMACHex+1+len(body))
	rest = hex.AppendEncode(rest, spoolMAC(key, body))
	rest = append(rest, ' ')
	rest = append(rest, body...)
	line := make([]byte, 0, len(rest)+10)
	line = fmt.Appendf(line, "%08x ", crc32.Checksum(rest, castagnoli))
	line = append(line, rest...)
	return append(line, '\n'), nil
}

// spoolMAC is the HMAC-SHA256 of a line's JSON.
func spoolMAC(key, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return h.Sum(nil)
}

// quarantine appends refused lines to outcomes.spool.rejected (0600,
// fsynced) so that the operator can look at them; they are never replayed.
func (s *Spool) quarantine(lines [][]byte) error {
	path := filepath.Join(filepath.Dir(s.path), spoolRejectedFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("keeping refused audit spool lines: %w", err)
	}
	for _, l := range lines {
		if _, err := f.Write(l); err != nil {
			_ = f.Close()
			return fmt.Errorf("keeping refused audit spool lines: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("keeping refused audit spool lines: %w", err)
	}
	return f.Close()
}

// sweepForeign runs before the file is rewritten from memory (s.mu held):
// when the file is not the size the gateway's own appends made it, another
// writer added to it during the run. Its lines whose MAC does not verify
// are moved to outcomes.spool.rejected and counted; lines that verify but
// are not among the entries (a copy of an earlier line) are dropped with
// the rewrite, as they would be replayed at most once anyway. A file that no
// longer parses is kept whole in outcomes.spool.rejected.
func (s *Spool) sweepForeign() error {
	fi, err := os.Stat(s.path)
	if err != nil || fi.Size() == s.bytes {
		return nil // nothing foreign (a missing file is rewritten anyway)
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("reading audit spool: %w", err)
	}
	_, rejected, _, perr := parseSpool(data, s.key)
	if perr != nil {
		rejected = [][]byte{data}
	}
	if len(rejected) == 0 {
		return nil
	}
	if err := s.quarantine(rejected); err != nil {
		return err
	}
	s.rejected += len(rejected)
	return nil
}

// Rejected returns the number of lines refused because their MAC did not
// verify, when the spool was opened or before it was rewritten (moved to
// outcomes.spool.rejected).
func (s *Spool) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// reserve takes room for one future entry; ErrSpoolFull when there is none.
func (s *Spool) reserve() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries)+s.reserved >= s.max {
		return ErrSpoolFull
	}
	s.reserved++
	return nil
}

// release gives back a reservation that was not needed.
func (s *Spool) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserved > 0 {
		s.reserved--
	}
}

// add appends an outcome and fsyncs the file; reserved says whether the
// caller holds a reservation (which this uses). Without one, a full spool
// refuses.
func (s *Spool) add(kind string, o *ToolCallOutcome, reserved bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reserved && s.reserved > 0 {
		s.reserved--
	} else if len(s.entries)+s.reserved >= s.max {
		return ErrSpoolFull
	}
	if s.f == nil {
		return fmt.Errorf("writing audit spool: %w", ErrClosed)
	}
	e := spoolEntry{ID: s.nextID, Kind: kind, Spooled: time.Now().UTC(), Outcome: o}
	line, err := encodeSpoolLine(e, s.key)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(line); err != nil {
		return fmt.Errorf("writing audit spool: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("syncing audit spool: %w", err)
	}
	s.nextID++
	e.rawBytes = len(line)
	s.entries = append(s.entries, e)
	s.bytes += int64(len(line))
	return nil
}

// Len returns the number of entries waiting.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Bytes returns the size of the spool file.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Free returns the room left (entries not spooled nor reserved).
func (s *Spool) Free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max - len(s.entries) - s.reserved
}

// head returns copies of the first n entries, in spool order.
func (s *Spool) head(n int) []spoolEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, len(s.entries))
	out := make([]spoolEntry, n)
	for i, e := range s.entries[:n] {
		o := *e.Outcome
		e.Outcome = &o
		out[i] = e
	}
	return out
}

// remove drops the entries with the given ids (they were written or need
// no writing) and rewrites the file without them.
func (s *Spool) remove(ids map[uint64]bool) error {
	if len(ids) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sweepForeign(); err != nil {
		return err
	}
	keep := make([]spoolEntry, 0, len(s.entries))
	var n int64
	for _, e := range s.entries {
		if !ids[e.ID] {
			keep = append(keep, e)
			n += int64(e.rawBytes)
		}
	}
	if err := s.rewrite(keep); err != nil {
		return err
	}
	s.entries, s.bytes = keep, n
	return nil
}

// rewrite replaces the file with entries: a temporary file, fsynced,
// renamed over the spool, the directory fsynced. s.mu is held (or s is not
// shared yet).
func (s *Spool) rewrite(entries []spoolEntry) error {
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("rewriting audit spool: %w", err)
	}
	var buf bytes.Buffer
	for _, e := range entries {
		line, err := encodeSpoolLine(e, s.key)
		if err != nil {
			_ = f.Close()
			return err
		}
		buf.Write(line)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		_ = f.Close()
		return fmt.Errorf("rewriting audit spool: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("rewriting audit spool: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("rewriting audit spool: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("rewriting audit spool: %w", err)
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return s.reopen()
}

func (s *Spool) reopen() error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening audit spool: %w", err)
	}
	if s.f != nil {
		_ = s.f.Close()
	}
	s.f = f
	return nil
}

// Close closes the file; the entries stay in it for the next start.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
