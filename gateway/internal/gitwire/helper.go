package gitwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"ironcurtain.dev/gateway/gitref"
)

// DefaultMaxListedRefs bounds the refs ReadHelperRefs accepts when its
// maxRefs is zero.
const DefaultMaxListedRefs = 100_000

// ReadHelperRefs reads the answer of a git remote helper to "list" or
// "list for-push" (gitremote-helpers: one "<id> <name>" line per ref, "@<target>
// <name>" for a symbolic ref, an optional ":object-format <name>" line, then
// a blank line) and returns the refs in the order listed; symbolic refs are
// skipped (they name no object).
//
// Refused, each with an error wrapping ErrProtocol: a line without its LF,
// ids that are not lower-case hex of the object format's length ("sha1" or
// "sha256"), the zero id, an object format other than objectFormat, ref
// names git's check-ref-format refuses or outside refs/, a ref twice, more
// than maxRefs lines, any other line, and data after the blank line. A
// listing that ends before the blank line gives an error wrapping
// io.ErrUnexpectedEOF.
func ReadHelperRefs(r io.Reader, objectFormat string, maxRefs int) ([]AdvertisedRef, error) {
	if maxRefs <= 0 {
		maxRefs = DefaultMaxListedRefs
	}
	idLen, err := idLength(objectFormat)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(io.LimitReader(r, int64(maxRefs+18)*(MaxRefName+int64(idLen)+8)))
	var refs []AdvertisedRef
	seen := map[string]bool{}
	for lines := 0; ; lines++ {
		if lines > maxRefs+16 { // refs, symbolic refs and the format
			return nil, protoErr("the listing holds more than %d refs", maxRefs)
		}
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: the listing ended without its blank line: %w", ErrProtocol, io.ErrUnexpectedEOF)
			}
			return nil, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			break
		}
		if len(line) > MaxRefName+idLen+8 || !printableASCII(line) {
			return nil, protoErr("listed line %q is too long or not printable", clip(line))
		}
		switch {
		case strings.HasPrefix(line, ":object-format "):
			if f := strings.TrimPrefix(line, ":object-format "); f != objectFormat {
				return nil, protoErr("the upstream's object format %q is not %s", clip(f), objectFormat)
			}
			continue
		case strings.HasPrefix(line, "@"):
			target, name, ok := strings.Cut(line[1:], " ")
			if !ok || target == "" || name == "" || strings.Contains(name, " ") {
				return nil, protoErr("listed symbolic ref %q is not \"@<target> <name>\"", clip(line))
			}
			continue
		}
		id, name, ok := strings.Cut(line, " ")
		switch {
		case !ok || !isObjectID(id, idLen):
			return nil, protoErr("listed ref %q is not \"<id> <name>\"", clip(line))
		case isZeroID(id):
			return nil, protoErr("ref %q is listed with the zero id", clip(name))
		case !strings.HasPrefix(name, "refs/") || !gitref.ValidName(name, false, false):
			return nil, protoErr("listed ref name %q is invalid", clip(name))
		case seen[name]:
			return nil, protoErr("ref %q is listed twice", clip(name))
		case len(refs) == maxRefs:
			return nil, protoErr("the listing holds more than %d refs", maxRefs)
		}
		seen[name] = true
		refs = append(refs, AdvertisedRef{ID: id, Name: name})
	}
	if n, _ := io.ReadFull(br, make([]byte, 1)); n > 0 {
		return nil, protoErr("data after the listing's blank line")
	}
	return refs, nil
}
