package gitwire

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"ironcurtain.dev/gateway/gitref"
)

// DefaultMaxAdvertisedRefs bounds the refs of one advertisement read by
// ReadAdvertisement when its maxRefs is zero.
const DefaultMaxAdvertisedRefs = 100_000

// ReadAdvertisement reads a smart HTTP protocol v0 ref advertisement of
// service (git-upload-pack or git-receive-pack), as an upstream answers
// GET info/refs?service=<service>: the "# service=" line and a flush-pkt,
// then the refs (the first one carrying the capabilities; an empty
// repository advertises "capabilities^{}" with the zero id) and a
// flush-pkt. It returns the refs in the order sent and the capabilities.
//
// Refused, each with an error wrapping ErrProtocol: a missing or different
// service line, a protocol version line (only v0 is read), ids that are not
// lower-case hex of the object format's length ("sha1" or "sha256"; a
// capability naming another format), ref names git's check-ref-format
// refuses, a ref twice, more than maxRefs refs, capabilities after the first
// line or not printable, "capabilities^{}" anywhere but alone, delim- and
// response-end-pkts, and data after the final flush-pkt. ".have" lines (the
// server's alternates) are skipped: they name no ref. A stream that ends
// early gives an error wrapping io.ErrUnexpectedEOF or io.EOF.
func ReadAdvertisement(r *Reader, service, objectFormat string, maxRefs int) ([]AdvertisedRef, []string, error) {
	if maxRefs <= 0 {
		maxRefs = DefaultMaxAdvertisedRefs
	}
	idLen, err := idLength(objectFormat)
	if err != nil {
		return nil, nil, err
	}
	kind, p, err := r.Next()
	if err != nil {
		return nil, nil, eofErr(err, "the advertisement is empty")
	}
	if kind != Data || string(trimLF(p)) != "# service="+service {
		return nil, nil, protoErr("the advertisement does not start with the %s service line", service)
	}
	if kind, _, err = r.Next(); err != nil {
		return nil, nil, eofErr(err, "the advertisement ended after its service line")
	}
	if kind != Flush {
		return nil, nil, protoErr("the service line is not followed by a flush-pkt")
	}
	var (
		refs  []AdvertisedRef
		caps  []string
		seen  = map[string]bool{}
		first = true
		empty bool
	)
	for {
		kind, p, err := r.Next()
		if err != nil {
			return nil, nil, eofErr(err, "the advertisement ended without a flush-pkt")
		}
		if kind == Flush {
			break
		}
		if kind != Data {
			return nil, nil, protoErr("unexpected %s in the advertisement", kind)
		}
		line := string(trimLF(p))
		if first && strings.HasPrefix(line, "version ") {
			return nil, nil, protoErr("protocol %q is not read here (only v0)", clip(line))
		}
		if empty {
			return nil, nil, protoErr("an empty repository's advertisement names a ref")
		}
		ref, capList, hasCaps := strings.Cut(line, "\x00")
		if hasCaps != first {
			if first {
				return nil, nil, protoErr("the first advertised ref carries no capabilities")
			}
			return nil, nil, protoErr("capabilities after the first advertised ref")
		}
		if hasCaps {
			caps, err = advertisedCaps(capList, objectFormat)
			if err != nil {
				return nil, nil, err
			}
		}
		id, name, ok := strings.Cut(ref, " ")
		if !ok || !isObjectID(id, idLen) {
			return nil, nil, protoErr("advertised ref %q is not \"<id> <name>\"", clip(ref))
		}
		switch {
		case name == "capabilities^{}":
			if !first || !isZeroID(id) {
				return nil, nil, protoErr("capabilities^{} is not alone with the zero id")
			}
			empty = true
		case name == ".have":
			// An alternate's tip: no ref.
		case isZeroID(id):
			return nil, nil, protoErr("ref %q is advertised with the zero id", clip(name))
		case !gitref.ValidName(name, false, false) || !strings.HasPrefix(name, "refs/") && name != "HEAD":
			return nil, nil, protoErr("advertised ref name %q is invalid", clip(name))
		case seen[name]:
			return nil, nil, protoErr("ref %q is advertised twice", clip(name))
		default:
			if len(refs) == maxRefs {
				return nil, nil, protoErr("the advertisement holds more than %d refs", maxRefs)
			}
			seen[name] = true
			refs = append(refs, AdvertisedRef{ID: id, Name: name})
		}
		first = false
	}
	if first {
		return nil, nil, protoErr("the advertisement lists no ref and no capabilities")
	}
	if n, _ := io.ReadFull(r.Rest(), make([]byte, 1)); n > 0 {
		return nil, nil, protoErr("data after the advertisement's flush-pkt")
	}
	return refs, caps, nil
}

// advertisedCaps splits a capability list, checking each is printable and
// that any object-format is the one expected.
func advertisedCaps(list, objectFormat string) ([]string, error) {
	if !printableASCII(strings.ReplaceAll(list, " ", "")) {
		return nil, protoErr("the advertised capabilities are not printable")
	}
	caps := strings.Fields(list)
	for _, c := range caps {
		if f, ok := strings.CutPrefix(c, "object-format="); ok && f != objectFormat {
			return nil, protoErr("the upstream's object format %q is not %s", clip(f), objectFormat)
		}
	}
	return caps, nil
}

// eofErr wraps an early end of the stream as a truncation.
func eofErr(err error, msg string) error {
	if errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: %w", msg, io.ErrUnexpectedEOF)
	}
	return err
}
