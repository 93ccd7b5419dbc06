// Package gitscan finds secrets in what a git push adds, like GitHub's push
// protection: every commit and annotated tag the push adds (message, author
// and committer lines) and every blob it adds (file contents, binary or
// not), read from the gateway's mirror (the push's quarantine) before
// anything goes upstream. Objects the upstream already has (reachable from
// the refs the caller names as excluded) are not read again.
//
// The work is bounded: Limits caps the objects listed and the bytes read;
// a push beyond them is reported as Incomplete, which callers treat as a
// finding (a human decides), never as clean.
package gitscan

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unsafe"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/secretscan"
)

// Defaults for Limits fields left zero.
const (
	// DefaultMaxBytes bounds the bytes of commits, tags and blobs read.
	DefaultMaxBytes = 64 << 20
	// DefaultMaxObjects bounds the objects a push may add and still be
	// scanned in full.
	DefaultMaxObjects = 200_000
)

// KindIncomplete is the kind of the Hit that says a push was too large to
// scan in full (Report.Incomplete): a human must decide on what was not read.
const KindIncomplete secretscan.Kind = "unscanned-push"

// Limits bound one scan.
type Limits struct {
	MaxBytes   int64
	MaxObjects int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	return l
}

// A Finding is one secret in one object.
type Finding struct {
	secretscan.Hit
	Object string // the object's id
}

// Report is what a scan found and how much it read.
type Report struct {
	Findings []Finding
	// Objects and Bytes are the commits, tags and blobs read and their size.
	Objects int
	Bytes   int64
	// Incomplete says a limit stopped the scan: Reason says which. Objects
	// beyond it were not read.
	Incomplete bool
	Reason     string
}

// Hits are the findings as hits for a decision, with one KindIncomplete
// hit when the scan was incomplete.
func (r Report) Hits() []secretscan.Hit {
	out := make([]secretscan.Hit, 0, len(r.Findings)+1)
	for _, f := range r.Findings {
		out = append(out, f.Hit)
	}
	if r.Incomplete {
		out = append(out, secretscan.Hit{Kind: KindIncomplete, Where: "push", Excerpt: r.Reason})
	}
	return out
}

// maxFindings bounds the findings of one scan (a push full of keys is
// reported by its first ones).
const maxFindings = 32

// Scan reads what tips add to the repository of o beyond the objects
// reachable from exclude (rev-list arguments such as "--all" or
// "--glob=refs/x/*", or object ids the remote has; none: everything
// reachable from tips is new) and scans
// it with d. tips must be object ids. An error means the push could not be
// scanned: callers refuse it.
func Scan(ctx context.Context, o gitexec.Options, d *secretscan.Detector, tips, exclude []string, lim Limits) (Report, error) {
	lim = lim.withDefaults()
	if len(tips) == 0 {
		return Report{}, nil
	}
	for _, t := range tips {
		if !isObjectID(t) {
			return Report{}, fmt.Errorf("scanning the push: %q is not an object id", clip(t))
		}
	}
	for _, x := range exclude {
		if x != "--all" && x != "--branches" && x != "--tags" && !(strings.HasPrefix(x, "--glob=refs/") && !strings.ContainsAny(x, " \n")) && !isObjectID(x) {
			return Report{}, fmt.Errorf("scanning the push: exclusion %q is not a ref selection or an object id", clip(x))
		}
	}
	objs, rep, err := listNew(ctx, o, tips, exclude, lim)
	if err != nil || len(objs) == 0 {
		return rep, err
	}
	scanNames(d, objs, &rep)
	if err := read(ctx, o, d, objs, lim.MaxBytes, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// scanNames scans the file and directory names the push adds (a key can be
// spelled as a file name). The hit names the object, never the path: the
// path is the secret.
func scanNames(d *secretscan.Detector, objs []object, rep *Report) {
	for i := range objs {
		ob := &objs[i]
		if len(ob.path) < 16 {
			continue
		}
		hits := d.ScanText("a file name (object "+ob.id[:12]+")", ob.path)
		if len(hits) > 0 {
			ob.path = "" // never show it, in this object's other findings either
		}
		for _, h := range hits {
			if len(rep.Findings) == maxFindings {
				break
			}
			rep.Findings = append(rep.Findings, Finding{Hit: h, Object: ob.id})
		}
	}
}

// object is one object the push adds.
type object struct {
	id   string
	path string // for blobs and trees: a path the object has in the pushed commits
	typ  string
	size int64
}

// listNew lists the objects reachable from tips and not from exclude.
func listNew(ctx context.Context, o gitexec.Options, tips, exclude []string, lim Limits) ([]object, Report, error) {
	args := append([]string{"rev-list", "--objects"}, tips...)
	if len(exclude) > 0 {
		args = append(args, "--not")
		args = append(args, exclude...)
	}
	lo := o
	// One line per object: an id, a space and a path (at most 4096 bytes).
	lo.MaxOutput = lim.MaxObjects * 160
	res, err := gitexec.Run(ctx, lo, args...)
	var rep Report
	if errors.Is(err, gitexec.ErrOutputLimit) {
		// Too many objects to list: scan none of them (a partial list
		// would not say which commits were read) and say so.
		rep.Incomplete = true
		rep.Reason = fmt.Sprintf("the push adds more than %d objects; it was not scanned", lim.MaxObjects)
		return nil, rep, nil
	}
	if err != nil {
		return nil, rep, fmt.Errorf("listing the pushed objects: %w", err)
	}
	lines := bytes.Split(bytes.TrimRight(res.Stdout, "\n"), []byte{'\n'})
	objs := make([]object, 0, len(lines))
	for _, l := range lines {
		if len(l) == 0 {
			continue
		}
		id, path, _ := strings.Cut(string(l), " ")
		if !isObjectID(id) {
			return nil, rep, fmt.Errorf("listing the pushed objects: unexpected line %q", clip(string(l)))
		}
		objs = append(objs, object{id: id, path: path})
	}
	if len(objs) > lim.MaxObjects {
		rep.Incomplete = true
		rep.Reason = fmt.Sprintf("the push adds more than %d objects; it was not scanned", lim.MaxObjects)
		return nil, rep, nil
	}
	return objs, rep, nil
}

// read streams the objects from git cat-file --batch and scans the commits,
// tags and blobs among them, until their bytes would exceed maxBytes.
// rev-list lists commits first, so a push too large to read in full still
// has every commit message scanned when the commits alone fit.
func read(ctx context.Context, o gitexec.Options, d *secretscan.Detector, want []object, maxBytes int64, rep *Report) error {
	if len(want) == 0 {
		return nil
	}
	var in strings.Builder
	for _, ob := range want {
		in.WriteString(ob.id)
		in.WriteByte('\n')
	}
	ro := o
	ro.Stdin = strings.NewReader(in.String())
	if ro.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ro.Timeout)
		defer cancel()
	}
	cmd, err := gitexec.Command(ctx, ro, "cat-file", "--batch", "--buffer")
	if err != nil {
		return fmt.Errorf("reading the pushed objects: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("reading the pushed objects: %w", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, left: 4096}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("reading the pushed objects: %w", err)
	}
	rerr := readBatch(bufio.NewReaderSize(stdout, 64<<10), d, want, maxBytes, rep)
	if rerr != nil || rep.Incomplete {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case rerr != nil:
		return fmt.Errorf("reading the pushed objects: %w", rerr)
	case rep.Incomplete:
		return nil // stopped on purpose
	case ctx.Err() != nil:
		return fmt.Errorf("reading the pushed objects: %w", gitexec.ErrTimeout)
	case werr != nil:
		return fmt.Errorf("reading the pushed objects: %w: %s", werr, clip(stderr.String()))
	}
	return nil
}

// Objects are scanned in chunks, so that memory stays bounded whatever a
// blob's size: each chunk is scanned with the last scanOverlap bytes of the
// one before (the longest pattern window, a JWT's, is 4 KiB), and a finding
// that ends inside that overlap was reported with the chunk before.
const (
	scanChunk   = 1 << 20
	scanOverlap = 4 << 10
)

// readBatch parses cat-file --batch output: "<id> <type> <size>\n<content>\n" per object.
func readBatch(br *bufio.Reader, d *secretscan.Detector, want []object, maxBytes int64, rep *Report) error {
	buf := make([]byte, 0, scanOverlap+scanChunk)
	var read int64
	for i := range want {
		ob := &want[i]
		head, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the header of %s: %w", ob.id, err)
		}
		f := strings.Fields(head)
		if len(f) != 3 || f[0] != ob.id {
			return fmt.Errorf("unexpected header %q for %s", clip(head), ob.id)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("unexpected header %q for %s", clip(head), ob.id)
		}
		ob.typ, ob.size = f[1], size
		switch ob.typ {
		case "commit", "tag", "blob", "tree":
		default:
			return fmt.Errorf("unexpected object type in %q for %s", clip(head), ob.id)
		}
		if ob.typ == "tree" {
			// Trees are not scanned (their names are in the blobs' paths).
			if _, err := br.Discard(int(size)); err != nil {
				return fmt.Errorf("reading %s: %w", ob.id, err)
			}
		} else {
			if read+size > maxBytes {
				rep.Incomplete = true
				rep.Reason = fmt.Sprintf("the push adds more than %d bytes of commits and files; the rest was not scanned", maxBytes)
				return nil
			}
			read += size
			if err := scanObject(br, d, ob, buf, rep); err != nil {
				return err
			}
			rep.Objects++
			rep.Bytes += size
		}
		if c, err := br.ReadByte(); err != nil || c != '\n' {
			return fmt.Errorf("reading %s: no newline after the content", ob.id)
		}
	}
	return nil
}

// scanObject reads ob's content from br chunk by chunk into buf and scans it.
func scanObject(br *bufio.Reader, d *secretscan.Detector, ob *object, buf []byte, rep *Report) error {
	where := where(*ob)
	buf = buf[:0]
	for left := ob.size; left > 0; {
		tail := len(buf)
		n := int(min(left, scanChunk))
		buf = buf[:tail+n]
		if _, err := io.ReadFull(br, buf[tail:]); err != nil {
			return fmt.Errorf("reading %s: %w", ob.id, err)
		}
		left -= int64(n)
		if len(rep.Findings) < maxFindings {
			// No copy: the detector keeps nothing of the text (an
			// excerpt is built anew by secretscan.Mask), and buf is
			// not written until the next chunk.
			text := unsafe.String(&buf[0], len(buf))
			for _, fd := range d.Scan(text) {
				if fd.End <= tail {
					continue // reported with the chunk before
				}
				if len(rep.Findings) == maxFindings {
					break
				}
				rep.Findings = append(rep.Findings, Finding{Hit: secretscan.Hit{Kind: fd.Kind, Where: where, Excerpt: secretscan.Mask(text, fd)}, Object: ob.id})
			}
		}
		keep := min(scanOverlap, len(buf))
		copy(buf, buf[len(buf)-keep:])
		buf = buf[:keep]
	}
	return nil
}

// where names an object for operators: the file path of a blob (bounded,
// printable), the kind and short id of a commit or tag.
func where(ob object) string {
	short := ob.id
	if len(short) > 12 {
		short = short[:12]
	}
	switch ob.typ {
	case "blob":
		if ob.path == "" {
			return "file (blob " + short + ")"
		}
		return "file " + safePath(ob.path) + " (blob " + short + ")"
	case "commit":
		return "commit " + short + " (message or author)"
	case "tag":
		return "tag " + short
	}
	return ob.typ + " " + short
}

// safePath shows a path an agent chose: printable ASCII, at most 120 bytes.
func safePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if b.Len() >= 120 {
			b.WriteString("…")
			break
		}
		if r >= 0x21 && r <= 0x7e {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return safePath(s)
}

func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// limitedBuffer keeps the first bytes of stderr.
type limitedBuffer struct {
	buf  *bytes.Buffer
	left int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	n := min(len(p), l.left)
	l.buf.Write(p[:n])
	l.left -= n
	return len(p), nil
}
