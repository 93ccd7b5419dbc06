package llmrelay

import (
	"bytes"
	"regexp"
)

// maxErrorBody bounds an upstream error body passed to the agent (after
// scrubbing); the rest is dropped.
const maxErrorBody = 1 << 20

var redacted = []byte("[redacted]")

// keyLike matches API keys as providers print them, whole or masked
// ("sk-proj-****abcd", "sk-ant-api03-..."), so an upstream error that
// quotes the gateway's key does not hand it, or its tail, to the agent.
var keyLike = regexp.MustCompile(`sk-[A-Za-z0-9_*-]{6,}`)

// scrub removes the provider's key, and anything shaped like a key, from an
// upstream error body.
func (p *provider) scrub(b []byte) []byte {
	if p.up.Key() != "" {
		b = bytes.ReplaceAll(b, []byte(p.up.Key()), redacted)
	}
	return keyLike.ReplaceAll(b, redacted)
}
