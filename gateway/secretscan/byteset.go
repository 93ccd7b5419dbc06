package secretscan

// A ByteSet is the set of byte values a text contains. A hint can only
// occur in a text whose set holds every byte of the hint, so one pass over a
// short text rules out most hints at the cost of a bit test each, where
// searching for each hint would cost a call per hint. It is a necessary
// condition only: a hint whose bytes are all present is still searched for.
type ByteSet [4]uint64

// prefilterMax bounds the texts whose ByteSet Scan computes: a longer text
// holds most bytes anyway, and the hint searches are fast on it.
const prefilterMax = 1 << 10

// BytesOf returns the set of bytes in s.
func BytesOf(s string) ByteSet {
	var b ByteSet
	for i := 0; i < len(s); i++ {
		c := s[i]
		b[c>>6] |= 1 << (c & 63)
	}
	return b
}

// FoldedBytesOf returns the set of bytes in s with ASCII upper-case letters
// taken as lower-case (for hints matched against lower-cased text).
func FoldedBytesOf(s string) ByteSet {
	var b ByteSet
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[c>>6] |= 1 << (c & 63)
	}
	return b
}

// Contains reports whether every byte of sub is in b.
func (b *ByteSet) Contains(sub *ByteSet) bool {
	return b[0]&sub[0] == sub[0] && b[1]&sub[1] == sub[1] &&
		b[2]&sub[2] == sub[2] && b[3]&sub[3] == sub[3]
}

// upperBits are the bits of 'A'..'Z' in word 1 of a ByteSet; the same bits
// shifted by 32 are 'a'..'z'.
const upperBits = uint64(1<<26-1) << ('A' - 64)

// Folded returns the set with every ASCII upper-case letter replaced by its
// lower-case letter: FoldedBytesOf(s) == BytesOf(s).Folded().
func (b ByteSet) Folded() ByteSet {
	up := b[1] & upperBits
	b[1] = b[1]&^upperBits | up<<32
	return b
}

// MayFind reports whether Scan could find anything in a text of at most
// 1,024 bytes whose bytes are set: false when every hint of every pattern
// (and every exact value) has a byte the text lacks, the prefilter Scan
// applies itself.
func (d *Detector) MayFind(set *ByteSet) bool {
	if d == nil {
		return false
	}
	if len(d.exact) > 0 {
		return true
	}
	for _, p := range d.patterns {
		sets := p.sets
		if d.loose && p.loose != nil && p.looseHints != nil {
			sets = p.looseSets
		}
		for i := range sets {
			if set.Contains(&sets[i]) {
				return true
			}
		}
	}
	return false
}

// PrefilterMax is the longest text MayFind may be asked about.
const PrefilterMax = prefilterMax
