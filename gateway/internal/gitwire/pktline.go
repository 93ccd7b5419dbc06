// Package gitwire reads and writes the parts of git's smart protocol that the
// gateway's git HTTP door speaks: pkt-lines, the ref-update request a client
// sends to git-receive-pack, the report-status answer, side-band packets and
// the ref advertisement.
//
// Everything an agent sends is parsed strictly: lengths are bounded, only the
// special packets the protocol allows at that point are accepted, unknown
// capabilities and malformed commands are refused with an error that names
// what was wrong, and nothing past the end of the command list is read
// except the pack itself, which the caller streams. Nothing here runs git or
// touches a repository.
package gitwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Packet lengths (git's pkt-line.h).
const (
	// MaxPacket is the largest pkt-line, its 4-byte header included.
	MaxPacket = 65520
	// MaxPayload is the largest payload of one pkt-line.
	MaxPayload = MaxPacket - 4
)

// Kind is what a pkt-line is.
type Kind uint8

// The kinds of pkt-line. Delim and ResponseEnd exist only in protocol v2.
const (
	Data        Kind = iota // a payload
	Flush                   // "0000"
	Delim                   // "0001"
	ResponseEnd             // "0002"
)

func (k Kind) String() string {
	switch k {
	case Data:
		return "data"
	case Flush:
		return "flush-pkt"
	case Delim:
		return "delim-pkt"
	case ResponseEnd:
		return "response-end-pkt"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ErrProtocol is wrapped by every refusal of malformed input.
var ErrProtocol = errors.New("git protocol error")

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// Reader reads pkt-lines from a stream. It buffers, so the bytes that follow
// the last pkt-line (a pack) must be read through Reader.Rest.
type Reader struct {
	br  *bufio.Reader
	buf [MaxPayload]byte
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, MaxPacket)}
}

// Next reads one pkt-line. The payload is valid until the next call. A
// stream that ends before a header is io.EOF; one that ends inside a packet
// is io.ErrUnexpectedEOF. Header digits must be lower-case hex (what git
// writes); "0003" and lengths above MaxPacket are refused.
func (r *Reader) Next() (Kind, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("reading pkt-line header: %w", io.ErrUnexpectedEOF)
		}
		return 0, nil, err
	}
	n, err := parseLength(hdr)
	if err != nil {
		return 0, nil, err
	}
	switch n {
	case 0:
		return Flush, nil, nil
	case 1:
		return Delim, nil, nil
	case 2:
		return ResponseEnd, nil, nil
	case 3:
		return 0, nil, protoErr("invalid pkt-line length 0003")
	}
	if n > MaxPacket {
		return 0, nil, protoErr("pkt-line length %d exceeds %d", n, MaxPacket)
	}
	p := r.buf[:n-4]
	if _, err := io.ReadFull(r.br, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, fmt.Errorf("reading a %d-byte pkt-line: %w", n, err)
	}
	return Data, p, nil
}

// Rest returns what follows the last pkt-line read (buffered bytes first).
func (r *Reader) Rest() io.Reader { return r.br }

func parseLength(h [4]byte) (int, error) {
	n := 0
	for _, c := range h {
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		default:
			return 0, protoErr("invalid pkt-line header %q", h[:])
		}
		n = n<<4 | d
	}
	return n, nil
}

// AppendPacket appends payload as one pkt-line to dst. It panics when the
// payload exceeds MaxPayload: callers split (side-band writers) or bound
// what they write.
func AppendPacket(dst, payload []byte) []byte {
	if len(payload) > MaxPayload {
		panic(fmt.Sprintf("gitwire: %d-byte pkt-line payload", len(payload)))
	}
	n := len(payload) + 4
	const hex = "0123456789abcdef"
	dst = append(dst, hex[n>>12&0xf], hex[n>>8&0xf], hex[n>>4&0xf], hex[n&0xf])
	return append(dst, payload...)
}

// AppendFlush appends a flush-pkt to dst.
func AppendFlush(dst []byte) []byte { return append(dst, "0000"...) }

// AppendString appends s as one pkt-line.
func AppendString(dst []byte, s string) []byte { return AppendPacket(dst, []byte(s)) }
