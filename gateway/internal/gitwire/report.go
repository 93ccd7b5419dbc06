package gitwire

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Side bands of side-band and side-band-64k.
const (
	BandData     = 1 // the report-status stream
	BandProgress = 2 // shown by the client as "remote: ..."
	BandError    = 3 // shown as "remote error: ..." and ends the exchange
)

// SideBand writes side-band packets to w; a zero-band SideBand (the client
// asked for none) writes band 1 unframed and drops progress.
type SideBand struct {
	w   io.Writer
	max int // largest payload of one packet, band byte excluded; 0: no side band
}

// NewSideBand returns a writer for the side band caps asked for.
func NewSideBand(w io.Writer, caps Capabilities) *SideBand {
	return &SideBand{w: w, max: caps.Band()}
}

// Write sends p on band, split into packets. Without a side band, band 1 is
// written as is and the others are dropped (git has nowhere to show them).
func (s *SideBand) Write(band byte, p []byte) error {
	if s.max == 0 {
		if band != BandData {
			return nil
		}
		_, err := s.w.Write(p)
		return err
	}
	payload := make([]byte, 0, min(len(p), s.max)+1)
	pkt := make([]byte, 0, cap(payload)+4)
	for len(p) > 0 {
		n := min(len(p), s.max)
		payload = append(append(payload[:0], band), p[:n]...)
		pkt = AppendPacket(pkt[:0], payload)
		if _, err := s.w.Write(pkt); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Progress sends one line of progress text (sanitised, bounded), which the
// client shows as "remote: <msg>".
func (s *SideBand) Progress(msg string) error {
	return s.Write(BandProgress, []byte(Sanitize(msg)+"\n"))
}

// Flush ends the side-band stream (the outer flush-pkt).
func (s *SideBand) Flush() error {
	if s.max == 0 {
		return nil
	}
	_, err := s.w.Write(AppendFlush(nil))
	return err
}

// RefStatus is the result of one ref update: Error "" means ok.
type RefStatus struct {
	Ref   string
	Error string
}

// AppendReport appends a report-status answer: "unpack ok" (or the unpack
// error), one "ok <ref>" or "ng <ref> <reason>" per ref, and a flush-pkt.
// Reasons are sanitised: one line of printable text, bounded.
func AppendReport(dst []byte, unpackErr string, refs []RefStatus) []byte {
	if unpackErr == "" {
		dst = AppendString(dst, "unpack ok\n")
	} else {
		dst = AppendString(dst, "unpack "+Sanitize(unpackErr)+"\n")
	}
	for _, r := range refs {
		if r.Error == "" {
			dst = AppendString(dst, "ok "+r.Ref+"\n")
		} else {
			dst = AppendString(dst, "ng "+r.Ref+" "+Sanitize(r.Error)+"\n")
		}
	}
	return AppendFlush(dst)
}

// MaxMessage bounds one sanitised message.
const MaxMessage = 400

// Sanitize makes msg safe to show in the client's terminal: one line,
// control and non-printing characters replaced by their escapes (a remote
// message must not move the cursor or recolour the screen), at most
// MaxMessage bytes.
func Sanitize(msg string) string {
	var b strings.Builder
	for _, r := range msg {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && !isPrintableWide(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		if b.Len() > MaxMessage {
			break
		}
	}
	s := b.String()
	if len(s) > MaxMessage {
		s = s[:MaxMessage]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

// isPrintableWide reports whether r may be shown as itself: printable, and
// not a format character (bidi controls, zero-width characters).
func isPrintableWide(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2060 && r <= 0x206f,
		r == 0xfeff, r == 0x00ad, r >= 0xfff9 && r <= 0xfffb, r >= 0xe0000 && r <= 0xe0fff:
		return false
	}
	return true
}

// AdvertisedRef is one ref in a ref advertisement.
type AdvertisedRef struct {
	ID, Name string
}

// AppendAdvertisement appends git-receive-pack's smart HTTP ref
// advertisement: the service line, a flush-pkt, the refs (the first one
// carrying caps; an empty repository advertises "capabilities^{}") and a
// flush-pkt. zeroID is the null id of the repository's object format.
func AppendAdvertisement(dst []byte, service string, refs []AdvertisedRef, caps []string, zeroID string) []byte {
	dst = AppendString(dst, "# service="+service+"\n")
	dst = AppendFlush(dst)
	capList := strings.Join(caps, " ")
	if len(refs) == 0 {
		dst = AppendString(dst, zeroID+" capabilities^{}\x00"+capList+"\n")
	}
	for i, r := range refs {
		line := r.ID + " " + r.Name
		if i == 0 {
			line += "\x00" + capList
		}
		dst = AppendString(dst, line+"\n")
	}
	return AppendFlush(dst)
}
