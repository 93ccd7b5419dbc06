package githubrelay

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"

	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// SecretSource gives the secret scanner in force (*policy.Engine).
type SecretSource interface {
	SecretScanner() *policy.SecretScanner
}

var _ SecretSource = (*policy.Engine)(nil)

// maxScanStrings bounds the strings of one request that are scanned; a
// request with more is a finding of its own (KindUnscanned): a human
// decides on what was not read.
const maxScanStrings = 4096

// KindUnscanned is the kind of the hit that says a write held more strings
// than the relay scans.
const KindUnscanned secretscan.Kind = "unscanned-request"

// doorContent scans what a write sends (every string of its JSON: titles,
// bodies, comments; GraphQL mutation input after variables are applied) and
// returns it as the call's door content: the body's digest and the
// findings, for the call's one decision (policy.Request.Door →
// structural-secret-egress). Reads are not scanned. The texts themselves
// are not tool arguments (the record keeps their length only), so the
// engine would not see them otherwise.
func (h *Handler) doorContent(subject string, v any, body []byte) policy.DoorContent {
	// The body's digest binds the decision (and any escalation) to this
	// body: a retry with the same arguments and another text is another
	// call.
	sum := sha256.Sum256(body)
	dc := policy.DoorContent{Digest: hex.EncodeToString(sum[:]), Subject: subject}
	if h.d.Secrets == nil {
		return dc
	}
	det := h.d.Secrets.SecretScanner().Detector()
	if det == nil {
		return dc
	}
	dc.Secrets = scanJSON(det, v)
	return dc
}

// scanJSON scans every string of a decoded JSON value, keys included, each
// located by its field path ("field body", "field input.title").
func scanJSON(det *secretscan.Detector, v any) []secretscan.Hit {
	var hits []secretscan.Hit
	n := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if n > maxScanStrings {
			return
		}
		switch x := v.(type) {
		case string:
			if n++; n > maxScanStrings {
				hits = append(hits, secretscan.Hit{Kind: KindUnscanned, Where: "request",
					Excerpt: "more than " + strconv.Itoa(maxScanStrings) + " strings; the rest was not scanned"})
				return
			}
			where := "field " + path
			if path == "" {
				where = "value"
			}
			hits = append(hits, det.ScanText(where, x)...)
		case []any:
			for i, e := range x {
				walk(join(path, strconv.Itoa(i)), e)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				// A key is text too; one that holds a secret is not named
				// in the locations of what it holds.
				kh := det.ScanText("a field name", k)
				hits = append(hits, kh...)
				name := clip(k)
				if len(kh) > 0 {
					name = "?"
				}
				walk(join(path, name), x[k])
			}
		}
	}
	walk("", v)
	return hits
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
