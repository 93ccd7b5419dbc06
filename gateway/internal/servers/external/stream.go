package external

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// errLineTooLong ends a run whose stdout line exceeds MaxLineBytes.
var errLineTooLong = errors.New("the server wrote a line longer than the limit")

// lineLimiter passes r through and fails (once calling over) when a line
// grows past max bytes, so a server that floods stdout without a newline
// cannot make the MCP client buffer it all.
type lineLimiter struct {
	r    io.Reader
	max  int
	cur  int // bytes since the last newline
	over func()
	once sync.Once
	err  error
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	chunk, long := p[:n], false
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			l.cur += len(chunk)
			break
		}
		long = long || l.cur+i > l.max
		l.cur = 0
		chunk = chunk[i+1:]
	}
	if long || l.cur > l.max {
		l.err = errLineTooLong
		l.once.Do(l.over)
		return 0, l.err
	}
	return n, err
}

// exitReader is a container's stdout: its end is the end of the run.
type exitReader struct {
	r io.Reader
	p *proc
}

func (e *exitReader) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil {
		if errors.Is(err, io.EOF) {
			e.p.exit(errors.New("the container's output ended"))
		} else {
			e.p.exit(err)
		}
	}
	return n, err
}

// stdinOf is a container's stdin: Close closes only the writing half, so
// the server sees end of input and its last output still arrives.
type stdinOf struct{ rwc io.ReadWriteCloser }

func (s stdinOf) Write(b []byte) (int, error) { return s.rwc.Write(b) }

func (s stdinOf) Close() error {
	if cw, ok := s.rwc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.rwc.Close()
}
