package llmrelay

// maxEventBytes bounds one SSE line and one event's data as the relay sees
// them for usage extraction. Bigger events still reach the agent unchanged;
// only their content is not inspected.
const maxEventBytes = 1 << 20

// sseParser splits a text/event-stream into events incrementally, as the
// chunks arrive, following the HTML living standard's parsing rules: lines
// end in CRLF, LF or CR (a CRLF may be split across chunks); "event" and
// "data" fields are kept (data lines joined with LF); comments and other
// fields are ignored; a blank line dispatches the event if it has data.
// It only reads the bytes: the relay forwards them untouched.
type sseParser struct {
	line     []byte // partial line carried over from the previous chunk
	event    []byte // current event name
	data     []byte // current event data, LF-terminated lines
	skipLF   bool   // the previous chunk ended with CR: a leading LF belongs to it
	overflow bool   // the current line or event grew past maxEventBytes
	lineOver bool   // the carried-over line grew past maxEventBytes
	onEvent  func(name, data []byte)
}

// feed parses p. It never retains p.
func (s *sseParser) feed(p []byte) {
	if s.skipLF && len(p) > 0 {
		s.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		i := indexEOL(p)
		if i < 0 {
			s.carry(p)
			return
		}
		if len(s.line) == 0 && !s.lineOver {
			s.processLine(p[:i], false)
		} else {
			s.carry(p[:i])
			s.processLine(s.line, s.lineOver)
			s.line, s.lineOver = s.line[:0], false
		}
		if p[i] == '\r' {
			if i+1 == len(p) {
				s.skipLF = true
			} else if p[i+1] == '\n' {
				i++
			}
		}
		p = p[i+1:]
	}
}

func (s *sseParser) carry(b []byte) {
	if s.lineOver {
		return
	}
	if len(s.line)+len(b) > maxEventBytes {
		s.lineOver = true
		s.line = s.line[:0]
		return
	}
	s.line = append(s.line, b...)
}

func indexEOL(p []byte) int {
	for i, c := range p {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

func (s *sseParser) processLine(line []byte, truncated bool) {
	if truncated {
		s.overflow = true
		return
	}
	if len(line) == 0 {
		s.dispatch()
		return
	}
	if line[0] == ':' {
		return // comment
	}
	field, value := line, []byte(nil)
	for i, c := range line {
		if c == ':' {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
			break
		}
	}
	switch string(field) {
	case "event":
		s.event = append(s.event[:0], value...)
	case "data":
		if s.overflow || len(s.data)+len(value)+1 > maxEventBytes {
			s.overflow = true
			return
		}
		s.data = append(s.data, value...)
		s.data = append(s.data, '\n')
	}
}

func (s *sseParser) dispatch() {
	if len(s.data) > 0 && !s.overflow && s.onEvent != nil {
		s.onEvent(s.event, s.data[:len(s.data)-1])
	}
	s.event, s.data, s.overflow = s.event[:0], s.data[:0], false
}
