package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// Secret scanning in the proxy (docs/egress.md, "Secret scanning"): a
// CONNECT's host name, and a plain-HTTP request's URL, headers and body (up
// to ProxyConfig.MaxScanBodyBytes) are scanned before anything is dialed. A
// hit is the policy's structural decision (policy.RuleSecretEgress):
// escalate by default, deny per detector by setting. The content of a TLS
// tunnel cannot be scanned.

// DefaultMaxScanBodyBytes is how much of a plain-HTTP request body is
// scanned when ProxyConfig.MaxScanBodyBytes is zero.
const DefaultMaxScanBodyBytes = 1 << 20

// maxBufferedBodies bounds the request-body bytes the proxy holds for
// scanning at once, all requests together (each takes its cap, or its
// Content-Length when smaller, until it ends): a burst of large bodies
// waits rather than exhausting memory.
const maxBufferedBodies = 64 << 20

// KindUnscannedBody is the kind of the hit that says a plain-HTTP body is
// longer than ProxyConfig.MaxScanBodyBytes: the rest was not scanned, so a
// human decides (as for a finding).
const KindUnscannedBody secretscan.Kind = "unscanned-body"

// SecretSource gives the scanner in force (the policy engine's, which a
// policy reload may replace). *policy.Engine implements it.
type SecretSource interface {
	SecretScanner() *policy.SecretScanner
}

var _ SecretSource = (*policy.Engine)(nil)

// scanner returns the scanner in force, nil when none is configured.
func (p *Proxy) scanner() *policy.SecretScanner {
	if p.secrets == nil {
		return nil
	}
	return p.secrets.SecretScanner()
}

// inspector finds the secrets a request would carry out. It is called after
// the request is authenticated, so that no stranger makes the proxy read a
// body.
type inspector func(det *secretscan.Detector, listed bool) ([]secretscan.Hit, error)

// scanHost is the CONNECT inspector: the host name's labels, as they
// arrived (raw: the request target's host part, before ParseHost mapped and
// lower-cased it) and canonical. Opaque high-entropy labels count only
// under a host nobody listed (DNS-label exfiltration); a key spelled into
// labels counts everywhere.
func scanHost(h netpolicy.Host, raw string) inspector {
	return func(det *secretscan.Detector, listed bool) ([]secretscan.Hit, error) {
		if h.IsIP() {
			return nil, nil
		}
		return hostHits(det, h, []string{raw}, listed), nil
	}
}

// hostHits scans the host as it arrived (every spelling in raw: the
// request target's, a Host header's) and in canonical form. The scan runs
// before any DNS lookup: a lookup would already carry the labels out.
func hostHits(det *secretscan.Detector, h netpolicy.Host, raw []string, listed bool) []secretscan.Hit {
	var hits []secretscan.Hit
	for _, r := range raw {
		if r != "" && r != h.String() {
			hits = append(hits, det.ScanHost(r)...)
		}
	}
	hits = dedupeHits(append(hits, det.ScanHost(h.String())...))
	if !listed {
		return hits
	}
	out := hits[:0]
	for _, x := range hits {
		if x.Kind != secretscan.KindHighEntropy {
			out = append(out, x)
		}
	}
	return out
}

// dedupeHits keeps the first hit of each kind and place.
func dedupeHits(hits []secretscan.Hit) []secretscan.Hit {
	seen := make(map[[2]string]bool, len(hits))
	out := hits[:0]
	for _, x := range hits {
		k := [2]string{string(x.Kind), x.Where}
		if !seen[k] {
			seen[k] = true
			out = append(out, x)
		}
	}
	return out
}

// scanRequest is the plain-HTTP inspector: the URL (path, query, fragment,
// decoded), every header but the proxy's own credentials, and the body up
// to maxBody bytes (read now and replayed to the upstream).
//
// rawHosts are the host as it arrived: the request target's host part and
// the Host header's (checkHostHeader compared them canonically, so they may
// differ in case).
func (p *Proxy) scanRequest(r *http.Request, st *reqState, u netpolicy.URL, rawHosts []string) inspector {
	maxBody := p.cfg.MaxScanBodyBytes
	return func(det *secretscan.Detector, listed bool) ([]secretscan.Hit, error) {
		// The digest of what was scanned names this request in an
		// escalation: an "approve similar" of the exact arguments then
		// covers this content only.
		sum := sha256.New()
		sum.Write([]byte(r.Method + " " + r.RequestURI + "\n"))
		defer func() { st.scanDigest = hex.EncodeToString(sum.Sum(nil)) }()
		hits := hostHits(det, u.Host, rawHosts, listed)
		hits = append(hits, withoutHost(det.ScanURL(r.RequestURI))...)
		hh, block := scanHeaders(det, r.Header)
		hits = append(hits, hh...)
		sum.Write([]byte(block))
		if r.Body == nil || r.Body == http.NoBody {
			return hits, nil
		}
		weight := maxBody + 1
		if r.ContentLength >= 0 && r.ContentLength < weight {
			weight = r.ContentLength
		}
		if err := p.bodies.Acquire(r.Context(), weight); err != nil {
			return nil, fmt.Errorf("waiting to buffer the request body: %w", err)
		}
		st.onFinish(func() { p.bodies.Release(weight) })
		bh, err := scanBody(det, r, maxBody, sum)
		if err != nil {
			return nil, err
		}
		return append(hits, bh...), nil
	}
}

// withoutHost drops the host hits of a URL scan (the host is scanned once,
// by hostHits, with the allowlist taken into account).
func withoutHost(hits []secretscan.Hit) []secretscan.Hit {
	out := hits[:0]
	for _, h := range hits {
		if h.Where == "host name" || len(h.Where) > 11 && h.Where[:11] == "host label " {
			continue
		}
		out = append(out, h)
	}
	return out
}

// scanHeaders scans every header (name and values; a value split across
// headers is not reassembled). The header block is scanned as one text, one
// line per value, and each finding is located by its line.
func scanHeaders(det *secretscan.Detector, hdr http.Header) ([]secretscan.Hit, string) {
	names := make([]string, 0, len(hdr))
	for k := range hdr {
		switch k {
		case "Proxy-Authorization", "Proxy-Connection":
			continue // the proxy's own, never forwarded
		}
		names = append(names, k)
	}
	sort.Strings(names)
	var text strings.Builder
	type line struct {
		end  int
		name string
	}
	var lines []line
	for _, k := range names {
		for _, v := range hdr[k] {
			text.WriteString(k)
			text.WriteString(": ")
			text.WriteString(v)
			text.WriteByte('\n')
			lines = append(lines, line{end: text.Len(), name: k})
		}
	}
	block := text.String()
	var hits []secretscan.Hit
	for _, f := range det.Scan(block) {
		i := sort.Search(len(lines), func(i int) bool { return lines[i].end > f.Start })
		where := "headers"
		if i < len(lines) {
			where = "header " + headerName(lines[i].name)
		}
		hits = append(hits, secretscan.Hit{Kind: f.Kind, Where: where, Excerpt: secretscan.Mask(block, f)})
	}
	return hits, block
}

// headerName shows a header name safely (bounded, printable).
func headerName(k string) string {
	if len(k) > 40 {
		k = k[:40] + "…"
	}
	b := []byte(k)
	for i, c := range b {
		if c < 0x21 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// scanBody reads up to maxBody bytes of the body, scans them, and puts them
// back in front of the rest. A longer body gives a KindUnscannedBody hit.
func scanBody(det *secretscan.Detector, r *http.Request, maxBody int64, sum io.Writer) ([]secretscan.Hit, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	r.Body = &replayBody{Reader: io.MultiReader(bytes.NewReader(buf), r.Body), Closer: r.Body}
	_, _ = sum.Write(buf)
	var hits []secretscan.Hit
	if int64(len(buf)) > maxBody {
		buf = buf[:maxBody]
		hits = append(hits, secretscan.Hit{Kind: KindUnscannedBody, Where: "request body",
			Excerpt: "the body is longer than " + strconv.FormatInt(maxBody, 10) + " bytes; the rest was not scanned"})
	}
	return append(det.ScanText("request body", string(buf)), hits...), nil
}

type replayBody struct {
	io.Reader
	io.Closer
}

// decideSecrets asks for the structural decision on hits: a denial by
// setting refuses; an escalation holds this one request for a human (the
// approval is not kept: the next request is scanned and asked about
// again). listed says whether the host is allowed anyway; when it is not,
// the same escalation covers it (for this request only).
func (p *Proxy) decideSecrets(ctx context.Context, st *reqState, sc *policy.SecretScanner, h netpolicy.Host, port int, hits []secretscan.Hit, listed bool) (string, string, *refusal) {
	d, _ := sc.Decide("", hits)
	p.metrics.secretFindings(hits)
	shown := shownHost(h, hits)
	if shown != h.String() {
		st.mu.Lock()
		st.hostShown = shown
		st.mu.Unlock()
	}
	if !listed {
		// Not named: the host itself may be what carries the secret.
		d.Reason += "; also: the host is not in the allowlist"
	}
	if d.Status != policy.Escalate {
		return "", "", &refusal{http.StatusForbidden, policy.RuleSecretEgress, d.Reason}
	}
	findings := make([]map[string]string, 0, len(d.Secrets))
	for _, f := range d.Secrets {
		findings = append(findings, map[string]string{"kind": string(f.Kind), "where": f.Where})
	}
	digest := st.scanDigest
	if digest == "" {
		sum := sha256.Sum256([]byte(st.kind + " " + h.HostPort(port)))
		digest = hex.EncodeToString(sum[:])
	}
	args, _ := json.Marshal(map[string]any{"host": shown, "port": port, "kind": st.kind, "method": st.method, "secrets": findings,
		"request_sha256": digest})
	res, err := p.escalator.Escalate(ctx, escalation.Request{
		CallID:    st.id,
		SessionID: st.session,
		Kind:      "egress",
		Args:      args,
		Rule:      policy.RuleSecretEgress,
		Reason:    d.OperatorReason() + " (egress to " + shown + " port " + strconv.Itoa(port) + ")",
		// No resource: an "approve similar" of the host (a domain scope)
		// must never cover a request that carries a secret.
	})
	if err != nil {
		st.fail(err)
		p.log.Warn("egress: escalation failed", "id", st.id, "error", err.Error())
		return "", "", &refusal{http.StatusForbidden, policy.RuleSecretEgress, d.Reason + "; no human decision could be obtained"}
	}
	if !res.Approved {
		status := res.Status
		if status == "" || status == "approved" {
			status = "denied"
		}
		return "", "", &refusal{http.StatusForbidden, policy.RuleSecretEgress, d.Reason + "; escalation " + res.ID + " " + status}
	}
	rule := policy.RuleSecretEgress + ": escalation " + res.ID
	if res.DecidedBy != "" {
		rule += " approved by " + res.DecidedBy
	}
	return rule, "a human approved this request despite: " + d.Reason, nil
}

// shownHost is the host as an escalation may show it: whole, unless the
// finding is in the host name itself (a key or a gateway secret spelled
// into labels), when only its last two labels are shown.
func shownHost(h netpolicy.Host, hits []secretscan.Hit) string {
	for _, x := range hits {
		if x.Where == "host name" || strings.HasPrefix(x.Where, "host label ") {
			labels := strings.Split(h.String(), ".")
			if len(labels) > 2 {
				labels = labels[len(labels)-2:]
			}
			return "(labels hidden)." + strings.Join(labels, ".")
		}
	}
	return h.String()
}

// errNoScan is what an inspector failure is recorded as.
var errNoScan = errors.New("the request could not be scanned for secrets")
