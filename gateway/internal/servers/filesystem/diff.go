package filesystem

import (
	"strconv"
	"strings"
)

const (
	diffContext = 3    // context lines around each change
	diffMaxD    = 1000 // edit distance beyond which the diff stops being minimal
)

type opKind byte

const (
	opEqual  opKind = ' '
	opDelete opKind = '-'
	opInsert opKind = '+'
)

// diffOp is one line of an edit script. Lines keep their "\n" (the last
// line of a file may lack it).
type diffOp struct {
	kind opKind
	line string
}

// unifiedDiff returns a git-style unified diff of a and b in the layout of
// the reference server's output (jsdiff's createTwoFilesPatch):
//
//	Index: name
//	===...
//	--- name	original
//	+++ name	modified
//	@@ -l,s +l,s @@
//
// followed by the hunks, with three lines of context.
func unifiedDiff(name, a, b string) string {
	var sb strings.Builder
	sb.WriteString("Index: ")
	sb.WriteString(name)
	sb.WriteString("\n===================================================================\n")
	sb.WriteString("--- " + name + "\toriginal\n")
	sb.WriteString("+++ " + name + "\tmodified\n")
	if a == b {
		return sb.String()
	}
	ops := diffLines(splitLines(a), splitLines(b))
	writeHunks(&sb, ops)
	return sb.String()
}

// splitLines splits s after each "\n".
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := make([]string, 0, strings.Count(s, "\n")+1)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// diffLines returns an edit script turning a into b. The common prefix and
// suffix are peeled off; the middle is diffed with Myers' algorithm on
// interned lines, and when its edit distance exceeds diffMaxD the middle is
// emitted as one replacement (still a correct diff, just not minimal).
func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]diffOp, 0, len(a)+len(b)-pre-suf)
	for _, l := range a[:pre] {
		ops = append(ops, diffOp{opEqual, l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	ops = append(ops, myers(ma, mb)...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, diffOp{opEqual, l})
	}
	return ops
}

// myers computes a shortest edit script (Myers 1986, forward greedy with a
// trace of the V arrays).
func myers(a, b []string) []diffOp {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(a, b)
	}
	ids := make(map[string]int32, n+m)
	intern := func(ls []string) []int32 {
		out := make([]int32, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	x1, y1 := intern(a), intern(b)

	limit := min(n+m, diffMaxD)
	off := limit + 1
	v := make([]int32, 2*off+1)
	// trace[d] holds v[k] for k in [-d-1, d+1] as it was when round d began.
	var trace [][]int32
	found := false
	for d := 0; d <= limit && !found; d++ {
		trace = append(trace, append([]int32(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int32
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - int32(k)
			for int(x) < n && int(y) < m && x1[x] == y1[y] {
				x++
				y++
			}
			v[off+k] = x
			if int(x) >= n && int(y) >= m {
				found = true
				break
			}
		}
	}
	if !found {
		return replaceAll(a, b)
	}

	rev := make([]diffOp, 0, n+m)
	x, y := int32(n), int32(m)
	for d := len(trace) - 1; d >= 0; d-- {
		w := trace[d]
		at := func(k int) int32 { return w[k+d+1] }
		k := int(x - y)
		var prevK int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := at(prevK)
		prevY := prevX - int32(prevK)
		for x > prevX && y > prevY {
			rev = append(rev, diffOp{opEqual, a[x-1]})
			x--
			y--
		}
		if d > 0 {
			if x == prevX {
				rev = append(rev, diffOp{opInsert, b[prevY]})
			} else {
				rev = append(rev, diffOp{opDelete, a[prevX]})
			}
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// replaceAll deletes every line of a and inserts every line of b.
func replaceAll(a, b []string) []diffOp {
	ops := make([]diffOp, 0, len(a)+len(b))
	for _, l := range a {
		ops = append(ops, diffOp{opDelete, l})
	}
	for _, l := range b {
		ops = append(ops, diffOp{opInsert, l})
	}
	return ops
}

// writeHunks groups ops into hunks with diffContext lines of context and
// writes them. Changes separated by at most 2*diffContext equal lines share
// a hunk.
func writeHunks(sb *strings.Builder, ops []diffOp) {
	// oldNo/newNo[i]: 1-based line numbers before op i.
	oldNo := make([]int, len(ops)+1)
	newNo := make([]int, len(ops)+1)
	o, n := 1, 1
	for i, op := range ops {
		oldNo[i], newNo[i] = o, n
		if op.kind != opInsert {
			o++
		}
		if op.kind != opDelete {
			n++
		}
	}
	oldNo[len(ops)], newNo[len(ops)] = o, n

	i := 0
	for i < len(ops) {
		for i < len(ops) && ops[i].kind == opEqual {
			i++
		}
		if i == len(ops) {
			return
		}
		start := max(0, i-diffContext)
		// Extend the hunk while the next change is close enough.
		end := i
		for {
			for end < len(ops) && ops[end].kind != opEqual {
				end++
			}
			gap := end
			for gap < len(ops) && ops[gap].kind == opEqual {
				gap++
			}
			if gap < len(ops) && gap-end <= 2*diffContext {
				end = gap
				continue
			}
			end = min(len(ops), end+diffContext)
			break
		}
		writeHunk(sb, ops[start:end], oldNo[start], newNo[start])
		i = end
	}
}

func writeHunk(sb *strings.Builder, ops []diffOp, oldStart, newStart int) {
	oldLines, newLines := 0, 0
	for _, op := range ops {
		if op.kind != opInsert {
			oldLines++
		}
		if op.kind != opDelete {
			newLines++
		}
	}
	// Unified diff quirk: an empty range starts one line earlier.
	if oldLines == 0 {
		oldStart--
	}
	if newLines == 0 {
		newStart--
	}
	sb.WriteString("@@ -" + strconv.Itoa(oldStart) + "," + strconv.Itoa(oldLines) +
		" +" + strconv.Itoa(newStart) + "," + strconv.Itoa(newLines) + " @@\n")
	for _, op := range ops {
		sb.WriteByte(byte(op.kind))
		if strings.HasSuffix(op.line, "\n") {
			sb.WriteString(op.line)
		} else {
			sb.WriteString(op.line)
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}
