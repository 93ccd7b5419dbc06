package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// versionDomain separates the policy version hash from any other use of
// SHA-256 (and names the encoding: a change of encoding changes it).
const versionDomain = "ironcurtain-policy-version-v1"

// VersionLen is the length of a policy version: hex digits of SHA-256.
const VersionLen = 16

// Version identifies the policy an engine decides with: the content hash of
// what was loaded (the compiled policy, the dynamic lists, the tool
// annotations and the settings that take part in decisions, and the
// attached shadow policy's own version). Equal versions decide alike on the
// same state; a reload that changes nothing keeps the version. It is the
// first VersionLen hex digits of a SHA-256 over the parsed artifacts in JSON
// (so whitespace and key order in the files do not change it).
func (e *Engine) Version() string { return e.version }

// versionWithShadow computes the version of e with its shadow attached.
func (e *Engine) versionWithShadow() string {
	if e.shadow == nil {
		return e.content
	}
	return combineVersions(e.content, e.shadow.Version())
}

// contentVersion hashes one engine's artifacts and settings. The policy is
// hashed as the engine uses it (rebased to the sandbox by LoadDir). An artifact that cannot be encoded still gets a version
// (its error text is hashed), so the result is never empty.
func contentVersion(p *CompiledPolicy, a *Annotations, l *DynamicLists, s Settings) string {
	h := sha256.New()
	h.Write([]byte(versionDomain))
	var n [8]byte
	put := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte("unencodable: " + err.Error())
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(name)))
		h.Write(n[:])
		h.Write([]byte(name))
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put("compiled-policy", p)
	put("tool-annotations", a)
	put("dynamic-lists", l)
	// ShadowPolicyDir names where the shadow came from; the shadow's content
	// enters through its own version (Engine.Version).
	s.ShadowPolicyDir = ""
	// Protected paths are a set: the order in which the configuration and
	// the loader add them (and repeats) decide nothing.
	s.ProtectedPaths = slices.Compact(slices.Sorted(slices.Values(s.ProtectedPaths)))
	put("settings", s)
	return hex.EncodeToString(h.Sum(nil))[:VersionLen]
}

// combineVersions is the version of a policy with a shadow policy attached.
func combineVersions(primary, shadow string) string {
	h := sha256.New()
	h.Write([]byte(versionDomain + "+shadow"))
	h.Write([]byte(primary))
	h.Write([]byte{0})
	h.Write([]byte(shadow))
	return hex.EncodeToString(h.Sum(nil))[:VersionLen]
}
