package githttp

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/gitmirror"
	"ironcurtain.dev/gateway/internal/gitwire"
	"ironcurtain.dev/gateway/policy"
)

// quarantine is a fresh object directory inside the mirror's objects that
// holds one push's pack until the push is done. git reads the mirror's own
// objects through it as alternates (a thin pack's bases come from the
// mirror only); nothing outside the push sees its objects.
type quarantine struct {
	dir     string // the quarantine object directory
	objects string // the mirror's object directory
}

// path is the quarantine for gitexec.Options.Quarantine ("" for none).
func (q *quarantine) path() string {
	if q == nil {
		return ""
	}
	return q.dir
}

// migrate moves the quarantine's pack into the mirror (after the push
// succeeded: the objects are upstream's now). The index goes last: git
// finds packs by their index.
func (q *quarantine) migrate() error {
	src := filepath.Join(q.dir, "pack")
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("reading the quarantine: %w", err)
	}
	sort.Slice(ents, func(i, j int) bool {
		return !strings.HasSuffix(ents[i].Name(), ".idx") && strings.HasSuffix(ents[j].Name(), ".idx")
	})
	for _, e := range ents {
		if e.IsDir() || !strings.HasPrefix(e.Name(), "pack-") {
			continue
		}
		if err := os.Rename(filepath.Join(src, e.Name()), filepath.Join(q.objects, "pack", e.Name())); err != nil {
			return fmt.Errorf("moving %s into the mirror: %w", e.Name(), err)
		}
	}
	return nil
}

func (q *quarantine) remove() { _ = os.RemoveAll(q.dir) }

// size is the bytes of the quarantine's packs (0 for none).
func (q *quarantine) size() int64 {
	if q == nil {
		return 0
	}
	var n int64
	ents, _ := os.ReadDir(filepath.Join(q.dir, "pack"))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".pack") {
			n += fi.Size()
		}
	}
	return n
}

// packError is a refusal of the pack, safe to show the client.
type packError struct{ reason string }

func (e *packError) Error() string { return e.reason }

// packReason is the client's text for a pack intake failure.
func packReason(err error) string {
	var pe *packError
	if errors.As(err, &pe) {
		return pe.reason
	}
	return "the pack could not be received"
}

// Pack header (git's pack-format.txt): "PACK", version, object count.
const packHeaderLen = 12

// receivePack indexes the pack from r into a new quarantine of m: the
// header is checked first (signature, version, object count against
// maxObjects), then git index-pack --strict --fix-thin reads the stream,
// bounded by maxBytes and ctx.
func receivePack(ctx context.Context, m *gitmirror.UpstreamMirror, r io.Reader, maxBytes int64, maxObjects int) (*quarantine, error) {
	var hdr [packHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &packError{fmt.Sprintf("the pack exceeds %d bytes", maxBytes)}
		}
		return nil, &packError{"the pack is missing or truncated"}
	}
	n, err := checkPackHeader(hdr[:], maxObjects)
	if err != nil {
		return nil, err
	}
	objects := filepath.Join(m.Dir(), "objects")
	dir, err := os.MkdirTemp(objects, "incoming-")
	if err != nil {
		return nil, fmt.Errorf("creating a quarantine: %w", err)
	}
	q := &quarantine{dir: dir, objects: objects}
	if err := os.Mkdir(filepath.Join(dir, "pack"), 0o700); err != nil {
		q.remove()
		return nil, fmt.Errorf("creating a quarantine: %w", err)
	}
	o := m.LocalOptions(q.dir)
	o.Timeout = untilDeadline(ctx)
	lr := &limitedReader{r: io.MultiReader(strings.NewReader(string(hdr[:])), r), left: maxBytes, limit: maxBytes}
	o.Stdin = lr
	_, err = gitexec.Run(ctx, o, "index-pack", "--stdin", "--strict", "--fix-thin",
		fmt.Sprintf("--max-input-size=%d", maxBytes))
	if err != nil {
		q.remove()
		if lr.hit {
			return nil, &packError{fmt.Sprintf("the pack exceeds %d bytes", maxBytes)}
		}
		return nil, indexError(err, maxBytes, m.Dir())
	}
	if err := checkPackEnd(q, lr, n, maxBytes); err != nil {
		q.remove()
		return nil, err
	}
	return q, nil
}

// checkPackEnd refuses bytes after the pack's trailer. index-pack reads a
// pack from a pipe up to its trailer and ignores what follows, so the door
// finds the pack's end itself: the rest of the body is drained through lr
// (which counted every byte given to index-pack) and compared with the
// length of the pack index-pack read, from its index (packLength).
func checkPackEnd(q *quarantine, lr *limitedReader, objects uint32, maxBytes int64) error {
	if _, err := io.Copy(io.Discard, lr); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &packError{fmt.Sprintf("the pack exceeds %d bytes", maxBytes)}
		}
		return &packError{"the data after the pack could not be read"}
	}
	sent := maxBytes - lr.left
	idxs, err := filepath.Glob(filepath.Join(q.dir, "pack", "pack-*.idx"))
	if err == nil && len(idxs) == 0 && objects == 0 {
		// An empty pack (a push of objects the upstream has), should git
		// write no index for it, is its header and trailer.
		if sent > packHeaderLen+idxHashLen {
			return &packError{fmt.Sprintf("data follows the pack (%d bytes after its end)", sent-packHeaderLen-idxHashLen)}
		}
		return nil
	}
	if err != nil || len(idxs) != 1 {
		return fmt.Errorf("finding the pushed pack's index: %d found: %v", len(idxs), err)
	}
	idx, err := os.ReadFile(idxs[0])
	if err != nil {
		return fmt.Errorf("reading the pushed pack's index: %w", err)
	}
	fi, err := os.Stat(strings.TrimSuffix(idxs[0], ".idx") + ".pack")
	if err != nil {
		return fmt.Errorf("reading the pushed pack: %w", err)
	}
	length, err := packLength(idx, objects, fi.Size())
	if err != nil {
		return fmt.Errorf("reading the pushed pack's index: %w", err)
	}
	switch {
	case sent > length:
		return &packError{fmt.Sprintf("data follows the pack (%d bytes after its end)", sent-length)}
	case sent < length:
		return fmt.Errorf("the pack index describes %d bytes, %d were received", length, sent)
	}
	return nil
}

// Pack index version 2 (git's gitformat-pack): magic, version, a 256-entry
// fan-out table, then per object its name, CRC-32 and 4-byte offset, then
// the 8-byte offsets, then two checksums.
const (
	idxHeaderLen = 8 + 256*4
	idxHashLen   = 20 // sha1: the only object format the door speaks
)

// packLength is the length of the pack index-pack read from its input,
// trailer included, given the index it wrote, the object count of the
// pack's header and the size of the pack file it wrote. --fix-thin appends
// the missing bases after the received objects (which keep their offsets)
// and rewrites the header and trailer: the received pack then ended where
// the first appended object starts, plus its trailer. Without appended
// objects the file is the received pack.
func packLength(idx []byte, objects uint32, packSize int64) (int64, error) {
	if len(idx) < idxHeaderLen || string(idx[:8]) != "\xfftOc\x00\x00\x00\x02" {
		return 0, errors.New("not a version 2 pack index")
	}
	var prev uint32
	for i := 0; i < 256; i++ {
		c := binary.BigEndian.Uint32(idx[8+4*i:])
		if c < prev {
			return 0, errors.New("the fan-out table decreases")
		}
		prev = c
	}
	n := uint64(prev)
	off := uint64(idxHeaderLen) + n*(idxHashLen+4)
	if uint64(len(idx)) < off+n*4+2*idxHashLen {
		return 0, fmt.Errorf("the index of %d objects is truncated", n)
	}
	large := idx[off+n*4 : uint64(len(idx))-2*idxHashLen]
	if uint64(objects) > n {
		return 0, fmt.Errorf("the index holds %d objects, the pack's header %d", n, objects)
	}
	if uint64(objects) == n {
		return packSize, nil
	}
	offsets := make([]uint64, n)
	for i := range offsets {
		o := uint64(binary.BigEndian.Uint32(idx[off+uint64(i)*4:]))
		if o&0x80000000 != 0 {
			j := (o &^ 0x80000000) * 8
			if j+8 > uint64(len(large)) {
				return 0, errors.New("a large offset is out of range")
			}
			o = binary.BigEndian.Uint64(large[j:])
		}
		offsets[i] = o
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	end := offsets[objects] + idxHashLen
	if end > uint64(packSize) || end < packHeaderLen+idxHashLen {
		return 0, fmt.Errorf("the received pack would end at %d, outside the pack file of %d bytes", end, packSize)
	}
	return int64(end), nil
}

// checkPackHeader checks a pack header and returns its object count.
func checkPackHeader(hdr []byte, maxObjects int) (uint32, error) {
	if len(hdr) != packHeaderLen || string(hdr[:4]) != "PACK" {
		return 0, &packError{"the data after the commands is not a pack"}
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return 0, &packError{fmt.Sprintf("pack version %d is not supported", v)}
	}
	n := binary.BigEndian.Uint32(hdr[8:12])
	if uint64(n) > uint64(maxObjects) {
		return 0, &packError{fmt.Sprintf("the pack holds %d objects, more than the %d allowed", n, maxObjects)}
	}
	return n, nil
}

// indexError turns an index-pack failure into the client's reason.
func indexError(err error, maxBytes int64, mirror string) error {
	var ge *gitexec.Error
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, gitexec.ErrTimeout):
		return &packError{"receiving the pack took too long"}
	case errors.As(err, &mbe):
		return &packError{fmt.Sprintf("the pack exceeds %d bytes", maxBytes)}
	case errors.As(err, &ge):
		msg := strings.ReplaceAll(ge.Stderr, mirror, "<mirror>")
		switch {
		case strings.Contains(msg, "maximum allowed size"):
			return &packError{fmt.Sprintf("the pack exceeds %d bytes", maxBytes)}
		case strings.Contains(msg, "fsck") || strings.Contains(msg, "error: object"):
			return &packError{"the pack fails fsck: " + firstLine(msg)}
		}
		return &packError{"the pack is invalid: " + firstLine(msg)}
	}
	return fmt.Errorf("indexing the pack: %w", err)
}

// firstLine is the first error line of git's stderr, sanitised.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "error: ") || strings.HasPrefix(l, "fatal: ") {
			return gitwire.Sanitize(l)
		}
	}
	return gitwire.Sanitize(strings.TrimSpace(s))
}

func untilDeadline(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left > 0 {
			return left
		}
		return time.Millisecond
	}
	return DefaultTimeout
}

// classifyError refuses a push whose objects do not support its commands.
type classifyError struct{ reason string }

func (e *classifyError) Error() string { return e.reason }

// classify works out what each command does from the objects: the ref's
// current value is refs' (the upstream's, as shown to the client or just
// fetched into the mirror), never the old id the client claimed; a
// fast-forward is an update whose current tip is an ancestor of the new one,
// and an update whose current tip the mirror lacks is a force (nothing
// shows it is a fast-forward). New objects must exist (in the quarantine or
// the mirror), be commits (tags: commits or tag objects) and be connected
// to what the mirror has. It also returns the current tips of the updated
// refs that the mirror holds (what the upstream has).
func classify(ctx context.Context, m *gitmirror.UpstreamMirror, q *quarantine, cmds []gitwire.Command, refs map[string]string) ([]policy.RefUpdate, []string, error) {
	o := m.LocalOptions(q.path())
	var news, olds []string
	for _, c := range cmds {
		if !c.IsDelete() {
			news = append(news, c.New)
		}
		if old, ok := refs[c.Ref]; ok && !slices.Contains(olds, old) {
			olds = append(olds, old)
		}
	}
	types := map[string]string{}
	if ids := append(append([]string(nil), news...), olds...); len(ids) > 0 {
		bo := o
		bo.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
		out, err := gitexec.Run(ctx, bo, "cat-file", "--batch-check=%(objectname) %(objecttype)")
		if err != nil {
			return nil, nil, fmt.Errorf("checking the pushed objects: %w", err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
			id, typ, _ := strings.Cut(l, " ")
			types[id] = typ
		}
	}
	have := func(id string) bool { t := types[id]; return t != "" && t != "missing" }
	var present []string
	for _, old := range olds {
		if have(old) {
			present = append(present, old)
		}
	}
	if len(news) > 0 {
		for _, c := range cmds {
			if c.IsDelete() {
				continue
			}
			typ := types[c.New]
			switch {
			case !have(c.New):
				return nil, nil, &classifyError{fmt.Sprintf("object %s for %s is not in the pack or the repository", c.New, c.Ref)}
			case strings.HasPrefix(c.Ref, "refs/heads/") && typ != "commit":
				return nil, nil, &classifyError{fmt.Sprintf("%s would point at a %s, not a commit", c.Ref, typ)}
			case strings.HasPrefix(c.Ref, "refs/tags/") && typ != "commit" && typ != "tag":
				return nil, nil, &classifyError{fmt.Sprintf("%s would point at a %s", c.Ref, typ)}
			}
		}
		args := append([]string{"rev-list", "--objects", "--quiet"}, news...)
		args = append(append(args, "--not", "--all"), present...)
		if _, err := gitexec.Run(ctx, o, args...); err != nil {
			var ge *gitexec.Error
			if errors.As(err, &ge) {
				return nil, nil, &classifyError{"the pack is incomplete: objects it refers to are missing"}
			}
			return nil, nil, fmt.Errorf("checking connectivity: %w", err)
		}
	}
	out := make([]policy.RefUpdate, 0, len(cmds))
	for _, c := range cmds {
		old, exists := refs[c.Ref]
		u := policy.RefUpdate{Ref: c.Ref, Old: old, New: c.New}
		if !exists {
			u.Old = zeroID
		}
		switch {
		case c.IsDelete():
			u.Kind = policy.UpdateDelete
		case !exists:
			u.Kind = policy.UpdateCreate
		case old == c.New:
			u.Kind = policy.UpdateFastForward
		case strings.HasPrefix(c.Ref, "refs/tags/"):
			u.Kind = policy.UpdateForce // any move of an existing tag
		case !have(old):
			u.Kind = policy.UpdateForce // the mirror cannot show the update is a fast-forward
		default:
			_, err := gitexec.Run(ctx, o, "merge-base", "--is-ancestor", old, c.New)
			var ge *gitexec.Error
			switch {
			case err == nil:
				u.Kind = policy.UpdateFastForward
			case errors.As(err, &ge) && ge.ExitCode == 1:
				u.Kind = policy.UpdateForce
			default:
				return nil, nil, fmt.Errorf("comparing %s with the upstream's: %w", c.Ref, err)
			}
		}
		out = append(out, u)
	}
	return out, present, nil
}

// mirrorRefs lists the mirror's branches and tags.
func mirrorRefs(ctx context.Context, m *gitmirror.UpstreamMirror) (map[string]string, error) {
	out, err := gitexec.Run(ctx, m.LocalOptions(""), "for-each-ref", "--format=%(objectname) %(refname)", "--", "refs/heads/", "refs/tags/")
	if err != nil {
		return nil, fmt.Errorf("listing the mirror's refs: %w", err)
	}
	refs := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
		if id, name, ok := strings.Cut(l, " "); ok {
			refs[name] = id
		}
	}
	return refs, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// requestBody returns the request body bounded to max bytes, decompressed
// when git sent it gzipped (the bound applies to both sides).
func requestBody(r *http.Request, max int64) (io.ReadCloser, error) {
	raw := http.MaxBytesReader(nil, r.Body, max)
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
		return raw, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(raw)
		if err != nil {
			return nil, fmt.Errorf("reading the gzipped body: %w", err)
		}
		return struct {
			io.Reader
			io.Closer
		}{&limitedReader{r: zr, left: max, limit: max}, raw}, nil
	}
	return nil, errors.New("unsupported Content-Encoding")
}

// limitedReader fails (rather than ending) past its limit, and says so.
type limitedReader struct {
	r     io.Reader
	left  int64
	limit int64
	hit   bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// Only a read past the limit that finds more data is a violation.
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		l.hit = true
		return 0, &http.MaxBytesError{Limit: l.limit}
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
