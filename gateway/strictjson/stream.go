package strictjson

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// ReadChecked reads one JSON value from r and checks it as Check does,
// while it reads: a body past a limit (too many members, too deep, too
// large) is refused as soon as the bytes that pass the limit arrive, and
// the rest is never read. It returns the bytes read (the value and the
// whitespace around it). An error reading r is returned wrapped, not as a
// refusal (errors.Is(err, ErrRefused) is false).
func ReadChecked(r io.Reader, lim Limits) ([]byte, error) {
	lim = lim.withDefaults()
	tr := &teeReader{r: r, max: lim.MaxBytes}
	dec := jsontext.NewDecoder(tr, jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))
	err := checkTokens(dec, lim)
	switch {
	case tr.err != nil:
		return nil, tr.err
	case tr.over:
		return nil, refuse("", "the body is larger than %d bytes", lim.MaxBytes)
	case err != nil:
		return nil, err
	}
	return tr.buf.Bytes(), nil
}

// teeReader keeps what it reads, up to max bytes; past that it stops
// with io.EOF (the check then refuses) and marks over.
type teeReader struct {
	r    io.Reader
	buf  bytes.Buffer
	max  int
	over bool
	err  error // the first error of r but io.EOF
}

func (t *teeReader) Read(p []byte) (int, error) {
	if t.over || t.err != nil {
		return 0, io.EOF
	}
	if room := t.max - t.buf.Len() + 1; t.max >= 0 && len(p) > room {
		p = p[:room]
	}
	n, err := t.r.Read(p)
	t.buf.Write(p[:n])
	if t.max >= 0 && t.buf.Len() > t.max {
		t.over = true
		return n, io.EOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		t.err = readError{err}
		return n, io.EOF
	}
	return n, err
}

// readError wraps an error of the reader (not a refusal).
type readError struct{ err error }

func (e readError) Error() string { return "reading JSON: " + e.err.Error() }
func (e readError) Unwrap() error { return e.err }
