package netpolicy

import (
	"strings"
	"testing"
)

// netURLSeeds are URLs on both sides of agreesWithNetURLFast: plain ones it
// answers itself, and the cases it leaves to net/url (IDN and IPv6 hosts,
// escapes, bad escapes in the path, the query and the fragment).
var netURLSeeds = []string{
	"https://pkg.go.dev/net/url", "https://api.github.com:443/repos/acme/app/pulls?state=open",
	"http://example.com", "https://example.com/a%20b?q=%zz#f%41", "https://example.com/%zz",
	"https://example.com/a#%z", "https://example.com/a?%#%", "https://example.com/%4", "https://example.com/a%",
	"https://bücher.example/x", "http://[::1]:8080/", "http://[fe80::1%25en0]/", "HTTPS://X.COM:443",
	"https://example.com?x=1/y", "https://example.com#/y", "https://example.com/?", "https://a.b:1/%2F%2f",
	"https://xn--bcher-kva.example/", "http://127.0.0.1:8080/a", "https://example.com/a%2", "https://EXAMPLE.com/#%25",
}

// parseURLNetOnly is ParseURL with the cross-check always asked of net/url
// (the code before agreesWithNetURLFast).
func parseURLNetOnly(raw string) (URL, error) {
	u, err := ParseURL(raw)
	if err != nil {
		return u, err
	}
	if !agreesWithNetURL(raw, u.Scheme, rawAuthority(raw)) {
		return URL{}, newParseError(ErrInvalidURL, raw, "ambiguous URL")
	}
	return u, nil
}

// rawAuthority is the authority as ParseURLScheme cuts it from an accepted URL.
func rawAuthority(raw string) string {
	_, rest, _ := strings.Cut(raw, "://")
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		return rest[:end]
	}
	return rest
}

// TestNetURLFastAgrees: ParseURL and the net/url-only path agree on the seeds,
// and the seeds exercise both answers of the shortcut.
func TestNetURLFastAgrees(t *testing.T) {
	fast, slow := 0, 0
	for _, raw := range netURLSeeds {
		checkNetURLFast(t, raw)
		u, err := ParseURL(raw)
		if err != nil {
			continue
		}
		path, _, _ := strings.Cut(strings.SplitN(raw[len(rawAuthority(raw))+len(u.Scheme)+3:], "#", 2)[0], "?")
		if path == "" {
			path = "/"
		}
		if agreesWithNetURLFast(raw, rawAuthority(raw), path) {
			fast++
		} else {
			slow++
		}
	}
	if fast == 0 || slow == 0 {
		t.Fatalf("seeds took the shortcut %d times and net/url %d times; want both", fast, slow)
	}
	for _, raw := range []string{"https://example.com/%zz", "https://example.com/a#%z", "https://example.com/a%"} {
		if _, err := ParseURL(raw); err == nil {
			t.Errorf("ParseURL(%q) accepted a URL net/url refuses", raw)
		}
	}
	if _, err := ParseURL("https://example.com/a?%#f"); err != nil {
		t.Errorf("a bad escape in the query (net/url does not check it) was refused: %v", err)
	}
}

// checkNetURLFast: ParseURL (with the shortcut) gives exactly what the
// net/url-only path gives, and whatever it accepts net/url reads alike.
func checkNetURLFast(t *testing.T, raw string) {
	t.Helper()
	got, gerr := ParseURL(raw)
	want, werr := parseURLNetOnly(raw)
	if (gerr == nil) != (werr == nil) || got != want {
		t.Fatalf("ParseURL(%q) = %+v, %v; net/url only: %+v, %v", raw, got, gerr, want, werr)
	}
	if gerr != nil {
		return
	}
	if !agreesWithNetURL(raw, got.Scheme, rawAuthority(raw)) {
		t.Fatalf("ParseURL(%q) accepted a URL net/url reads differently", raw)
	}
}

// FuzzNetURLFastAgrees: the shortcut never accepts a URL the net/url
// cross-check would refuse (ParseURL equals the net/url-only path).
func FuzzNetURLFastAgrees(f *testing.F) {
	for _, s := range netURLSeeds {
		f.Add(s)
	}
	f.Fuzz(checkNetURLFast)
}
