package gitscan

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/secretscan"
)

// What a push sends beside the objects it adds: the names of the refs it
// creates or moves, its push options, and the commit or tag each ref will
// point at. They leave with the push even when the upstream already has
// every object (a secret spelled as a branch name, a token pushed as a tag,
// an old commit whose message holds a key pushed under a new name), so
// they are scanned whatever Scan finds new.

// nameSeparators turn the separators a detector's word boundaries may not
// see ('_' and '.' join words in a ref name) into '/', so that a key
// between underscores is still found; both spellings are scanned.
var nameSeparators = strings.NewReplacer("_", "/", ".", "/")

// NameHits scans each name (ref names, push options) for secrets: as text,
// with '_' and '.' read as separators, and as a URL path is scanned
// (base64-looking runs decoded; long opaque runs when high-entropy detection
// is on). The hit's location is "<what> <i>" (1-based), with " (base64)"
// when found decoded: never the name itself, which is the secret. Hits of
// one name are deduplicated by kind and location.
func NameHits(d *secretscan.Detector, what string, names []string) []secretscan.Hit {
	if d == nil {
		return nil
	}
	var out []secretscan.Hit
	for i, name := range names {
		where := what + " " + strconv.Itoa(i+1)
		seen := map[string]bool{}
		add := func(hs []secretscan.Hit, decoded func(secretscan.Hit) bool) {
			for _, h := range hs {
				dec := decoded(h)
				h.Where = where
				if dec {
					h.Where += " (base64)"
				}
				if k := string(h.Kind) + "\x00" + h.Where; !seen[k] {
					seen[k] = true
					out = append(out, h)
				}
			}
		}
		plain := func(secretscan.Hit) bool { return false }
		add(d.ScanText(where, name), plain)
		if strings.ContainsAny(name, "_.") {
			add(d.ScanText(where, nameSeparators.Replace(name)), plain)
		}
		add(d.ScanURL(nameURL+name), func(h secretscan.Hit) bool { return strings.HasSuffix(h.Where, "(base64)") })
	}
	return out
}

// nameURL prefixes a name to scan it as a URL path.
const nameURL = "https://ref.invalid/"

// maxPeel bounds how many annotated tags in a chain ScanTips follows.
const maxPeel = 4

// maxTagBytes bounds one annotated tag object read whole to find its target.
const maxTagBytes = 1 << 20

// ScanTips reads the objects tips name (commit, annotated tag, blob) from
// the repository of o, whether or not the upstream has them, and scans
// their content: commit and tag messages, author and tagger lines. An
// annotated tag's target is read too, through chains of up to maxPeel tags.
// Trees are not read. The bytes read are bounded by lim.MaxBytes (beyond:
// Report.Incomplete). Locations are Scan's ("commit 1a2b… (message or
// author)", "tag 1a2b…"), so that a finding of both is one finding.
func ScanTips(ctx context.Context, o gitexec.Options, d *secretscan.Detector, tips []string, lim Limits) (Report, error) {
	lim = lim.withDefaults()
	var rep Report
	seen := map[string]bool{}
	var queue []string
	for _, t := range tips {
		if !isObjectID(t) {
			return rep, fmt.Errorf("scanning the pushed refs: %q is not an object id", clip(t))
		}
		if !seen[t] {
			seen[t] = true
			queue = append(queue, t)
		}
	}
	var read int64
	for depth := 0; len(queue) > 0; depth++ {
		if depth > maxPeel {
			rep.Incomplete = true
			rep.Reason = fmt.Sprintf("a pushed tag is a chain of more than %d tags; the rest was not scanned", maxPeel)
			return rep, nil
		}
		targets, err := readTips(ctx, o, d, queue, lim.MaxBytes-read, &rep)
		if err != nil || rep.Incomplete {
			return rep, err
		}
		read = rep.Bytes
		queue = queue[:0]
		for _, t := range targets {
			if !seen[t] {
				seen[t] = true
				queue = append(queue, t)
			}
		}
	}
	return rep, nil
}

// readTips streams cat-file --batch output for ids into tipBatch.
func readTips(ctx context.Context, o gitexec.Options, d *secretscan.Detector, ids []string, maxBytes int64, rep *Report) ([]string, error) {
	ro := o
	ro.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	if ro.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ro.Timeout)
		defer cancel()
	}
	cmd, err := gitexec.Command(ctx, ro, "cat-file", "--batch")
	if err != nil {
		return nil, fmt.Errorf("reading the pushed refs' objects: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("reading the pushed refs' objects: %w", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, left: 4096}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("reading the pushed refs' objects: %w", err)
	}
	targets, rerr := tipBatch(bufio.NewReaderSize(stdout, 64<<10), d, ids, maxBytes, rep)
	if rerr != nil || rep.Incomplete {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case rerr != nil:
		return nil, fmt.Errorf("reading the pushed refs' objects: %w", rerr)
	case rep.Incomplete:
		return nil, nil // stopped on purpose
	case ctx.Err() != nil:
		return nil, fmt.Errorf("reading the pushed refs' objects: %w", gitexec.ErrTimeout)
	case werr != nil:
		return nil, fmt.Errorf("reading the pushed refs' objects: %w: %s", werr, clip(stderr.String()))
	}
	return targets, nil
}

// tipBatch parses cat-file --batch output for ids and scans each commit,
// tag and blob (trees are skipped); it returns the targets of the annotated
// tags read. A missing object, a header for another object or content that
// does not match its size is an error; more than maxBytes of content is
// Report.Incomplete.
func tipBatch(br *bufio.Reader, d *secretscan.Detector, ids []string, maxBytes int64, rep *Report) ([]string, error) {
	buf := make([]byte, 0, scanOverlap+scanChunk)
	var read int64
	var targets []string
	for _, id := range ids {
		head, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("reading the header of %s: %w", id, err)
		}
		f := strings.Fields(head)
		if len(f) != 3 || f[0] != id {
			return nil, fmt.Errorf("unexpected header %q for %s", clip(head), id)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("unexpected header %q for %s", clip(head), id)
		}
		ob := object{id: id, typ: f[1], size: size}
		switch ob.typ {
		case "tree":
			if _, err := br.Discard(int(min(size, 1<<40))); err != nil {
				return nil, fmt.Errorf("reading %s: %w", id, err)
			}
		case "commit", "blob", "tag":
			if read+size > maxBytes {
				rep.Incomplete = true
				rep.Reason = fmt.Sprintf("the pushed refs point at more than %d bytes of commits, tags and files; the rest was not scanned", maxBytes)
				return nil, nil
			}
			read += size
			if ob.typ == "tag" {
				if size > maxTagBytes {
					return nil, fmt.Errorf("tag %s is %d bytes, more than %d", id, size, maxTagBytes)
				}
				content := make([]byte, size)
				if _, err := io.ReadFull(br, content); err != nil {
					return nil, fmt.Errorf("reading %s: %w", id, err)
				}
				if err := scanObject(bufio.NewReader(bytes.NewReader(content)), d, &ob, buf, rep); err != nil {
					return nil, err
				}
				if t, ok := tagTarget(content); ok {
					targets = append(targets, t)
				}
			} else if err := scanObject(br, d, &ob, buf, rep); err != nil {
				return nil, err
			}
			rep.Objects++
			rep.Bytes += size
		default:
			return nil, fmt.Errorf("unexpected object type in %q for %s", clip(head), id)
		}
		if c, err := br.ReadByte(); err != nil || c != '\n' {
			return nil, fmt.Errorf("reading %s: no newline after the content", id)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("unexpected output after %d objects", len(ids))
	}
	return targets, nil
}

// tagTarget is the object an annotated tag points at, when that is a
// commit or another tag (the objects whose messages leave with it).
func tagTarget(content []byte) (string, bool) {
	obj, rest, ok := bytes.Cut(content, []byte{'\n'})
	if !ok {
		return "", false
	}
	typ, _, _ := bytes.Cut(rest, []byte{'\n'})
	id, ok := bytes.CutPrefix(obj, []byte("object "))
	if !ok || !isObjectID(string(id)) {
		return "", false
	}
	switch string(typ) {
	case "type commit", "type tag":
		return string(id), true
	}
	return "", false
}

// Merge adds o's findings that r does not hold yet (same object and kind)
// and its counts to r; an incomplete o makes r incomplete.
func (r *Report) Merge(o Report) {
	type key struct {
		obj  string
		kind secretscan.Kind
	}
	have := map[key]bool{}
	for _, f := range r.Findings {
		have[key{f.Object, f.Kind}] = true
	}
	for _, f := range o.Findings {
		if !have[key{f.Object, f.Kind}] && len(r.Findings) < maxFindings {
			have[key{f.Object, f.Kind}] = true
			r.Findings = append(r.Findings, f)
		}
	}
	r.Objects += o.Objects
	r.Bytes += o.Bytes
	if o.Incomplete && !r.Incomplete {
		r.Incomplete, r.Reason = true, o.Reason
	}
}
