// Package secretscan finds secrets in what is about to leave the gateway: URLs, host names,
// request bodies, commit messages and blobs, GitHub texts. It is the one list of secret
// formats: the audit redaction masks what the same patterns find.
//
// A Detector reports the kind of a secret and where it is, never its value: a Finding holds
// byte offsets into the scanned text, and Mask gives the short excerpt an operator may see
// ("AKIA…MPLE"). The package is pure (standard library only) so that the policy engine can
// use it.
//
// Scanning is built for throughput: every pattern has literal hints that each of its matches
// contains; the text is searched for the hints (fast substring search) and the regular
// expression runs only on a bounded window around a hint. Text without hints costs a few
// substring searches.
package secretscan

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Kind names a secret format. The names are stable: they appear in audit rows, settings and
// escalations.
type Kind string

// The detectors. Each has a pattern below, except KindExact (values the gateway was given)
// and KindHighEntropy (opaque values in URLs and host names, off by default).
const (
	KindPrivateKey   Kind = "private-key"
	KindGitHubToken  Kind = "github-token"
	KindGitHubPAT    Kind = "github-fine-grained-token"
	KindGitLabToken  Kind = "gitlab-token"
	KindSlackToken   Kind = "slack-token"
	KindSlackWebhook Kind = "slack-webhook"
	KindAnthropicKey Kind = "anthropic-api-key"
	KindOpenAIKey    Kind = "openai-api-key"
	KindGoogleAPIKey Kind = "google-api-key"
	KindAWSKeyID     Kind = "aws-access-key-id"
	KindAWSSecret    Kind = "aws-secret-access-key"
	KindJWT          Kind = "json-web-token"
	KindURLPassword  Kind = "url-password"
	// KindSessionToken is an agent token the gateway minted (icsess_ and 43 base64url
	// characters): only its digest is stored, so it cannot be matched exactly.
	KindSessionToken      Kind = "ironcurtain-session-token"
	KindExact             Kind = "gateway-secret"
	KindHighEntropy       Kind = "high-entropy-value"
	maxFindings                = 32
	minExactSecretLength       = 8
	defaultEntropyMinLen       = 24
	defaultEntropyBits         = 4.0
	defaultLabelEntropy        = 3.3
	defaultLabelMinLength      = 24
)

// A pattern finds one kind of secret. Every match of re contains one of hints (case
// sensitive) and lies within back bytes before the hint and span bytes after its start.
type pattern struct {
	kind  Kind
	hints []string
	back  int
	span  int
	re    *regexp.Regexp
	// group, when > 0, is the submatch that is the secret (the rest is context, such as
	// "aws_secret_access_key=").
	group int
	// near, when set, is a cheap necessary condition on the bytes after the hint: the regular
	// expression runs only when it holds.
	near func(after string) bool
	// loose, when set, replaces re (and looseHints, when set, hints) in a loose Detector
	// (Options.Loose): the audit redaction masks shorter and older spellings of the same
	// format too, where a false positive only costs a masked word.
	loose      *regexp.Regexp
	looseHints []string
	looseSpan  int
	// valid, when set, must hold for a strict match's value (placeholders such as
	// "user:password@" in documentation are not secrets); the loose form masks them anyway.
	valid func(value string) bool
	// pivots[i] is rarestByte(hints[i]), loosePivots for looseHints (computed at init).
	pivots, loosePivots []int
	// sets[i] is BytesOf(hints[i]), looseSets for looseHints (computed at init).
	sets, looseSets []ByteSet
	// foldedSets[i] is foldedURLSet(hints[i]), looseFoldedSets for looseHints (computed at
	// init; urlprefilter.go).
	foldedSets, looseFoldedSets []ByteSet
	// needs, when set, are bytes every match holds besides a hint's (a URL password's '@'):
	// the URL prefilter (urlprefilter.go) rules the pattern out when one is missing.
	needs    string
	needsSet ByteSet
}

func init() {
	for i := range patterns {
		p := &patterns[i]
		for _, h := range p.hints {
			p.pivots = append(p.pivots, rarestByte(h))
			p.sets = append(p.sets, BytesOf(h))
			p.foldedSets = append(p.foldedSets, foldedURLSet(h))
		}
		for _, h := range p.looseHints {
			p.loosePivots = append(p.loosePivots, rarestByte(h))
			p.looseSets = append(p.looseSets, BytesOf(h))
			p.looseFoldedSets = append(p.looseFoldedSets, foldedURLSet(h))
		}
		p.needsSet = BytesOf(p.needs)
	}
}

// patterns are tried in this order; a later match that overlaps an earlier one is dropped
// (so an Anthropic key is not also reported as an OpenAI key).
var patterns = []pattern{
	{kind: KindPrivateKey, hints: []string{"PRIVATE KEY"}, back: 32, span: 128,
		re: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]{0,24}PRIVATE KEY(?: BLOCK)?-----\s*(?:[A-Za-z0-9-]+:[^\n]*\n\s*)*[A-Za-z0-9+/=]{40}`)},
	{kind: KindGitHubToken, hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, back: 0, span: 260,
		re:    regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,251}\b`),
		loose: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,255}\b`)},
	{kind: KindGitHubPAT, hints: []string{"github_pat_"}, back: 0, span: 260,
		re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,244}\b`)},
	{kind: KindGitLabToken, hints: []string{"glpat-"}, back: 0, span: 128,
		re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_\-]{20,100}\b`)},
	{kind: KindSlackToken, hints: []string{"xox"}, back: 0, span: 256,
		re:    regexp.MustCompile(`\bxox[abposre]-(?:[0-9]+-){1,3}[A-Za-z0-9\-]{10,200}\b`),
		loose: regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9\-]{10,}`)},
	{kind: KindSlackWebhook, hints: []string{"hooks.slack.com/"}, back: 0, span: 160,
		re: regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,12}/[A-Z0-9]{6,14}/[A-Za-z0-9]{20,40}`)},
	{kind: KindAnthropicKey, hints: []string{"sk-ant-"}, back: 0, span: 260,
		re: regexp.MustCompile(`\bsk-ant-(?:[a-z]{2,8}[0-9]{2}-)?[A-Za-z0-9_\-]{32,240}`)},
	{kind: KindOpenAIKey, hints: []string{"sk-"}, back: 0, span: 260,
		re:    regexp.MustCompile(`\bsk-(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]{20,240}T3BlbkFJ[A-Za-z0-9_\-]{20,240}|\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,240}|\bsk-[A-Za-z0-9]{48}\b`),
		loose: regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{20,}`)},
	{kind: KindGoogleAPIKey, hints: []string{"AIza"}, back: 0, span: 48,
		re: regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}(?:[^0-9A-Za-z_\-]|$)`)},
	{kind: KindAWSKeyID, hints: []string{"AKIA", "ASIA", "ABIA", "ACCA"}, back: 0, span: 24,
		re: regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b`),
		// IAM unique ids (AGPA, AIDA, AROA, ...) are not credentials but name principals.
		loose:      regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b`),
		looseHints: []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "ABIA", "ACCA"}},
	{kind: KindAWSSecret, hints: []string{"aws", "AWS", "Aws"}, back: 0, span: 120, group: 1, near: hasAssignment,
		re:         regexp.MustCompile(`(?i)aws[A-Za-z0-9_.\-]{0,24}(?:secret|sk)[A-Za-z0-9_.\-]{0,24}["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`),
		loose:      regexp.MustCompile(`(?i)aws[A-Za-z0-9_.\-]{0,24}(?:secret|sk)[A-Za-z0-9_.\-]{0,24}["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})`),
		looseHints: []string{"aws", "AWS", "Aws", "aWS", "aWs", "awS", "AwS", "AWs"}},
	{kind: KindJWT, hints: []string{"eyJ"}, back: 0, span: 16 << 10, looseSpan: 64 << 10,
		re:    regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,}`),
		loose: regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`)},
	{kind: KindSessionToken, hints: []string{"icsess_"}, back: 0, span: 56, group: 1,
		re: regexp.MustCompile(`\b(icsess_[A-Za-z0-9_\-]{43})(?:[^A-Za-z0-9_\-]|$)`)},
	{kind: KindURLPassword, hints: []string{"://"}, needs: "@", back: 32, span: 300, group: 1, near: hasUserinfo, valid: plausiblePassword,
		re:    regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^/\s:@"'<>]{1,100}:([^@\s/"'<>]{1,128})@[A-Za-z0-9\[]`),
		loose: regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]{0,30}://[^/\s:@"']{0,100}:([^@\s/"']{1,256})@`)},
}

// DefaultKinds are the detectors on when a setting does not choose: every format above and
// the exact values. High-entropy detection is off until its false-positive rate is measured
// for the deployment.
func DefaultKinds() []Kind {
	out := make([]Kind, 0, len(patterns)+1)
	for _, p := range patterns {
		out = append(out, p.kind)
	}
	return append(out, KindExact)
}

// MaxFindings bounds the findings one Scan reports.
const MaxFindings = maxFindings

// AllKinds lists every kind a setting may name.
func AllKinds() []Kind { return append(DefaultKinds(), KindHighEntropy) }

// A Secret is a value the gateway holds (a GitHub token, a model API key, an agent token)
// that must never leave by exact match. Label names it in findings; the value is never shown.
type Secret struct {
	Label string
	Value string
}

// Options configure a Detector. The zero value is the default detectors without exact values.
type Options struct {
	// Kinds are the detectors to run; nil means DefaultKinds. KindHighEntropy only applies to
	// URL parts and host names.
	Kinds []Kind
	// Exact are values matched literally (KindExact); values shorter than 8 bytes are refused.
	Exact []Secret
	// Loose also matches shorter and older spellings of some formats (see pattern.loose): for
	// redaction, never for decisions.
	Loose bool
}

// A Finding is one secret: its kind and where it is, as byte offsets into the scanned text.
// Label names the exact value for KindExact.
type Finding struct {
	Kind       Kind
	Start, End int
	Label      string
}

// A Detector scans text. It is immutable and safe for concurrent use.
type Detector struct {
	patterns []*pattern
	exact    []Secret
	entropy  bool
	loose    bool
}

// New returns a Detector for opts, or an error naming a bad kind or exact value.
func New(opts Options) (*Detector, error) {
	kinds := opts.Kinds
	if kinds == nil {
		kinds = DefaultKinds()
	}
	on := make(map[Kind]bool, len(kinds))
	known := make(map[Kind]bool)
	for _, k := range AllKinds() {
		known[k] = true
	}
	for _, k := range kinds {
		if !known[k] {
			return nil, fmt.Errorf("unknown secret detector %q (known: %s)", k, joinKinds(AllKinds()))
		}
		on[k] = true
	}
	d := &Detector{entropy: on[KindHighEntropy], loose: opts.Loose}
	for i := range patterns {
		if on[patterns[i].kind] {
			d.patterns = append(d.patterns, &patterns[i])
		}
	}
	if on[KindExact] {
		for i, s := range opts.Exact {
			if len(s.Value) < minExactSecretLength {
				return nil, fmt.Errorf("exact secret %d (%q) is shorter than %d bytes: it would match ordinary text", i, s.Label, minExactSecretLength)
			}
			if s.Label == "" {
				return nil, fmt.Errorf("exact secret %d has no label", i)
			}
			d.exact = append(d.exact, s)
		}
	}
	return d, nil
}

// has reports whether the detector runs the pattern of kind k.
func (d *Detector) has(k Kind) bool {
	for _, p := range d.patterns {
		if p.kind == k {
			return true
		}
	}
	return false
}

// MustDefault returns the default Detector without exact values.
func MustDefault() *Detector {
	d, err := New(Options{})
	if err != nil {
		panic(err)
	}
	return d
}

func joinKinds(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Scan returns the secrets in text, in order of position, at most 32 of them (a text with
// more is reported by its first 32). Overlapping findings are reported once.
func (d *Detector) Scan(text string) []Finding { return d.scan(text, true) }

// scan is Scan, with the ByteSet prefilter when prefilter is set (tests
// compare both).
func (d *Detector) scan(text string, prefilter bool) []Finding {
	if d == nil {
		return nil
	}
	var out []Finding
	for _, s := range d.exact {
		for off := 0; len(out) < maxFindings; {
			i := strings.Index(text[off:], s.Value)
			if i < 0 {
				break
			}
			start := off + i
			out = append(out, Finding{Kind: KindExact, Start: start, End: start + len(s.Value), Label: s.Label})
			off = start + len(s.Value)
		}
	}
	// A short text is first reduced to the set of its bytes: a hint with a
	// byte the text lacks is not searched for (see ByteSet).
	var set *ByteSet
	if prefilter && len(text) <= prefilterMax {
		bs := BytesOf(text)
		set = &bs
	}
	for _, p := range d.patterns {
		out = p.scan(text, out, d.loose, set)
	}
	return tidy(out)
}

// scan appends the matches of p in text (of its loose form when loose).
// set, when not nil, is BytesOf(text).
func (p *pattern) scan(text string, out []Finding, loose bool, set *ByteSet) []Finding {
	re, hints, pivots, sets, span := p.re, p.hints, p.pivots, p.sets, p.span
	if loose && p.loose != nil {
		re = p.loose
		if p.looseHints != nil {
			hints, pivots, sets = p.looseHints, p.loosePivots, p.looseSets
		}
		if p.looseSpan > 0 {
			span = p.looseSpan
		}
	}
	for h, hint := range hints {
		if set != nil && !set.Contains(&sets[h]) {
			continue // a byte of hint is not in text
		}
		pivot := pivots[h]
		for off := 0; len(out) < maxFindings; {
			i := indexHint(text[off:], hint, pivot)
			if i < 0 {
				break
			}
			at := off + i
			if p.near != nil && !p.near(text[at+len(hint):min(at+span, len(text))]) {
				off = at + len(hint)
				continue
			}
			lo := max(at-p.back, 0)
			hi := min(at+span, len(text))
			window := text[lo:hi]
			m := re.FindStringSubmatchIndex(window)
			if m == nil {
				off = at + len(hint)
				continue
			}
			if m[1] == len(window) && hi < len(text) {
				// The match may go on past the window: match again on the rest of the text,
				// so that no tail of a long value is left out of the finding.
				hi = len(text)
				window = text[lo:hi]
				if m = re.FindStringSubmatchIndex(window); m == nil {
					off = at + len(hint)
					continue
				}
			}
			start, end := lo+m[0], lo+m[1]
			if p.group > 0 && m[2*p.group] >= 0 {
				start, end = lo+m[2*p.group], lo+m[2*p.group+1]
			}
			if p.kind == KindGoogleAPIKey && end-start > 39 {
				end = start + 39 // the pattern consumes one byte of context to bound the key
			}
			if !loose && p.valid != nil && !p.valid(text[start:end]) {
				off = max(lo+m[1], at+len(hint))
				continue
			}
			out = append(out, Finding{Kind: p.kind, Start: start, End: end})
			off = max(lo+m[1], at+len(hint))
		}
	}
	return out
}

// byteCommonness ranks bytes by how often they occur in source code and prose, most common
// first; bytes not listed are rare. Hints are searched for by their rarest byte, which
// makes far fewer false starts than searching for their first.
const byteCommonness = " \tetaoinsrlcdhupmfgybwvk\n.,()\"=_/-:;{}xESTRIACNOLDP*0123456789jqz"

// rarestByte returns the index in hint of its least common byte.
func rarestByte(hint string) int {
	best, bestRank := 0, -1
	for i := 0; i < len(hint); i++ {
		r := strings.IndexByte(byteCommonness, hint[i])
		if r < 0 {
			r = len(byteCommonness)
		}
		if r > bestRank {
			best, bestRank = i, r
		}
	}
	return best
}

// indexHint is strings.Index(text, hint), searching for hint[pivot] first.
func indexHint(text, hint string, pivot int) int {
	c := hint[pivot]
	for off := pivot; off < len(text); {
		i := strings.IndexByte(text[off:], c)
		if i < 0 {
			return -1
		}
		start := off + i - pivot
		if start+len(hint) <= len(text) && text[start:start+len(hint)] == hint {
			return start
		}
		off += i + 1
	}
	return -1
}

// hasUserinfo reports whether the authority after "://" has an '@' (a password can only
// come before one).
func hasUserinfo(after string) bool {
	for i := 0; i < len(after); i++ {
		switch after[i] {
		case '@':
			return i > 0
		case '/', ' ', '\t', '\n', '\r', '"', '\'', '<', '>', '?', '#':
			return false
		}
	}
	return false
}

// placeholderWords mark a documentation password wherever they appear in it
// ("user:password@", "postgres:mysecretpassword@"); weakPlaceholders only as the whole
// password, optionally followed by digits ("admin:admin@", "u:test123@").
var (
	placeholderWords = []string{"password", "passwd", "secret", "example", "changeme", "xxxx", "****", "dummy",
		"redacted", "placeholder", "your"}
	weakPlaceholders = map[string]bool{"pass": true, "pwd": true, "test": true, "foo": true, "bar": true, "foobar": true,
		"user": true, "admin": true, "root": true, "mysql": true, "postgres": true, "token": true, "sample": true, "guest": true}
)

// plausiblePassword reports whether a URL's password could be a real one: at least 8
// characters, not a template ("${PASS}", "<password>", "%s", "{{.Pass}}"), not one character
// repeated, and not a placeholder.
func plausiblePassword(v string) bool {
	if len(v) < 8 || strings.ContainsAny(v, "${}<>%*`[]()") || strings.Count(v, v[:1]) == len(v) {
		return false
	}
	l := strings.ToLower(v)
	for _, w := range placeholderWords {
		if strings.Contains(l, w) {
			return false
		}
	}
	return !weakPlaceholders[strings.TrimRight(l, "0123456789")]
}

// hasAssignment reports whether an '=' or ':' follows within a key name's length.
func hasAssignment(after string) bool {
	if len(after) > 64 {
		after = after[:64]
	}
	return strings.ContainsAny(after, "=:")
}

// tidy sorts findings by position and drops those overlapping an earlier-listed finding of
// higher precedence (exact values, then the pattern order).
func tidy(fs []Finding) []Finding {
	if len(fs) < 2 {
		return fs
	}
	rank := func(k Kind) int {
		if k == KindExact {
			return -1
		}
		for i, p := range patterns {
			if p.kind == k {
				return i
			}
		}
		return len(patterns)
	}
	sort.SliceStable(fs, func(i, j int) bool { return rank(fs[i].Kind) < rank(fs[j].Kind) })
	kept := fs[:0:0]
	for _, f := range fs {
		overlaps := false
		for _, k := range kept {
			if f.Start < k.End && k.Start < f.End {
				overlaps = true
				break
			}
		}
		if !overlaps {
			kept = append(kept, f)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].Start < kept[j].Start })
	if len(kept) > maxFindings {
		kept = kept[:maxFindings]
	}
	return kept
}

// Mask returns what an operator may see of finding f in text: the first and last four
// characters of a long value ("AKIA…MPLE"), the kind alone for a short one, and never any
// part of an exact value the gateway holds.
func Mask(text string, f Finding) string {
	if f.Kind == KindExact {
		return "[" + f.Label + "]"
	}
	if f.Start < 0 || f.End > len(text) || f.Start >= f.End {
		return "[" + string(f.Kind) + "]"
	}
	v := []rune(text[f.Start:f.End])
	if len(v) < 16 {
		return "[" + string(f.Kind) + "]"
	}
	return safeExcerpt(string(v[:4])) + "…" + safeExcerpt(string(v[len(v)-4:]))
}

// safeExcerpt keeps printable ASCII only, so a masked excerpt cannot carry control or
// invisible characters to an operator's screen.
func safeExcerpt(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 0x21 && r <= 0x7e {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
