package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
)

// With the MAC option every JSON line ends in a "mac" field: the
// HMAC-SHA256, under the gateway's key, of the line's bytes up to (not
// including) the `,"mac":"…"}` suffix. A line another writer appends to
// the file (a process the gateway started, as its user) has no MAC that
// verifies: VerifyJSONLLine says so. The key is the spool's
// (ProcessSpoolKey, or audit.spool_key_file to verify across restarts).

// macSuffixLen is the length of `,"mac":"` + 64 hex digits + `"}`.
const macSuffixLen = len(`,"mac":"`) + 2*sha256.Size + len(`"}`)

// ErrJSONLMAC is returned by VerifyJSONLLine for a line the gateway did
// not write with the given key.
var ErrJSONLMAC = errors.New("audit line not written by this gateway (missing or wrong mac)")

// MAC makes every line carry an HMAC under key (at least SpoolKeySize
// bytes; a shorter key is refused by OpenJSONL's caller, see
// VerifyJSONLLine).
func MAC(key []byte) JSONLOption {
	k := bytes.Clone(key)
	return func(j *JSONL) { j.mac = hmac.New(sha256.New, k) }
}

// appendMAC turns `{...}\n` in buf into `{...,"mac":"<hex>"}\n`; h is the
// sink's HMAC (used under its mutex).
func appendMAC(buf *bytes.Buffer, h hash.Hash) {
	b := buf.Bytes()
	body := b[:len(b)-2] // without "}\n"
	h.Reset()
	h.Write(body)
	var raw [sha256.Size]byte
	var sum [2 * sha256.Size]byte
	hex.Encode(sum[:], h.Sum(raw[:0]))
	buf.Truncate(len(b) - 2)
	buf.WriteString(`,"mac":"`)
	buf.Write(sum[:])
	buf.WriteString("\"}\n")
}

// VerifyJSONLLine checks the mac of one line of the JSON-lines audit file
// (with or without its newline).
func VerifyJSONLLine(key, line []byte) error {
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) < macSuffixLen+2 || !bytes.HasPrefix(line[len(line)-macSuffixLen:], []byte(`,"mac":"`)) ||
		!bytes.HasSuffix(line, []byte(`"}`)) {
		return ErrJSONLMAC
	}
	body := line[:len(line)-macSuffixLen]
	got := make([]byte, sha256.Size)
	if _, err := hex.Decode(got, line[len(line)-macSuffixLen+len(`,"mac":"`):len(line)-2]); err != nil {
		return ErrJSONLMAC
	}
	h := hmac.New(sha256.New, key)
	h.Write(body)
	if !hmac.Equal(got, h.Sum(nil)) {
		return ErrJSONLMAC
	}
	return nil
}
