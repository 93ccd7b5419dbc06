package secretscan

// urlClean reports whether ScanURL can find nothing in raw, without parsing it: a cheap
// necessary condition checked on the URL as a whole, so that an ordinary URL costs one pass
// over its bytes and a few bit tests instead of a parse and a scan of every part.
//
// It holds when raw is short printable ASCII without '%' (percent-decoding could make any
// byte), without '@' (user information, where a password would be), without a run of 16 or
// more base64 characters (nothing is base64-decoded then) and, for every pattern, without
// any of its hints (nor, for the gateway's exact values, the value) in the folded form
// below. Every part ScanURL scans is then a substring of raw, of raw with '+' read as a space
// (query values), or an upper- or lower-cased substring (the host name); so a hint found in
// any part is found in fold(raw), where fold lower-cases ASCII letters and reads '+' as a
// space. High-entropy detection looks for no hint, so it always takes the full scan.
func (d *Detector) urlClean(raw string) bool {
	if d.entropy || len(raw) > prefilterMax {
		return false
	}
	var set ByteSet // of fold(raw)
	run := 0
	for i := 0; i < len(raw); i++ {
		x := urlCleanBytes[raw[i]]
		if x == 0 {
			return false
		}
		if x&urlBase64 != 0 {
			if run++; run >= 16 {
				return false
			}
		} else {
			run = 0
		}
		c := x &^ urlBase64
		set[c>>6] |= 1 << (c & 63)
	}
	for _, p := range d.patterns {
		hints, sets := p.hints, p.foldedSets
		if d.loose && p.looseHints != nil {
			hints, sets = p.looseHints, p.looseFoldedSets
		}
		if !set.Contains(&p.needsSet) {
			continue
		}
		for h, hint := range hints {
			if set.Contains(&sets[h]) && containsFoldedURL(raw, hint) {
				return false
			}
		}
	}
	for _, s := range d.exact {
		if containsFoldedURL(raw, s.Value) {
			return false
		}
	}
	return true
}

// urlCleanBytes classifies each byte for urlClean's pass: 0 for a byte that
// rules the prefilter out (controls, space, DEL, non-ASCII, '%', '@'), else
// foldURLByte of it, with urlBase64 set for a byte of isBase64Byte.
var urlCleanBytes = func() (t [256]byte) {
	for c := 0x21; c <= 0x7e; c++ {
		if c == '%' || c == '@' {
			continue
		}
		t[c] = foldURLByte(byte(c))
		if isBase64Byte(byte(c)) {
			t[c] |= urlBase64
		}
	}
	return t
}()

// urlBase64 marks a base64 byte in urlCleanBytes (folded bytes are below 0x80).
const urlBase64 = 0x80

// foldURLByte is the fold of urlClean: ASCII letters lower-cased, '+' read as a space.
func foldURLByte(c byte) byte {
	switch {
	case c >= 'A' && c <= 'Z':
		return c + 'a' - 'A'
	case c == '+':
		return ' '
	}
	return c
}

// foldedURLSet is the ByteSet of fold(s).
func foldedURLSet(s string) ByteSet {
	var b ByteSet
	for i := 0; i < len(s); i++ {
		c := foldURLByte(s[i])
		b[c>>6] |= 1 << (c & 63)
	}
	return b
}

// containsFoldedURL reports whether fold(sub) occurs in fold(s).
func containsFoldedURL(s, sub string) bool {
	if len(sub) == 0 {
		return true
	}
	first := foldURLByte(sub[0])
	for i := 0; i+len(sub) <= len(s); i++ {
		if foldURLByte(s[i]) != first {
			continue
		}
		j := 1
		for j < len(sub) && foldURLByte(s[i+j]) == foldURLByte(sub[j]) {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}
