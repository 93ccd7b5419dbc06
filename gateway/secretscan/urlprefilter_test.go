package secretscan

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
)

// urlPrefilterCases are URLs for which the URL prefilter must change no hit: secrets in
// every part, spelled in other cases, behind '+', '%', '@' and base64, and clean URLs that
// hold a hint's bytes without the hint.
var urlPrefilterCases = []string{
	"", "https://pkg.go.dev/net/url", "https://github.com/search?q=golang+context+cancel+deadline&type=code&p=2#results",
	"https://github.com/search?q=" + awsKeyID, "https://" + strings.ToLower(awsKeyID) + ".example.com/",
	"https://example.com/" + ghToken + "/x", "https://example.com/#" + jwt, slackHook,
	"https://bob:s3cretpassw0rd@example.com/", "https://user:password@example.com/", "https://@example.com/",
	"https://example.com/?q=" + strings.ReplaceAll("-----BEGIN RSA PRIVATE KEY-----", " ", "+") + strings.Repeat("MIIEowIBAAKCAQEA", 4),
	"https://example.com/?q=" + base64.URLEncoding.EncodeToString([]byte("t="+ghToken)),
	"https://example.com/a/" + base64.RawURLEncoding.EncodeToString([]byte("t="+ghToken)),
	"https://example.com/?aws_secret_access_key=" + strings.ReplaceAll(awsSecret, "/", "%2F"),
	"https://example.com/?q=%67hp_" + strings.Repeat("aB3dE5fG7h", 4), "https://exa mple.com/%zz?" + awsKeyID,
	"https://EXACT-SECRET-VALUE.example.com/", "https://example.com/exact-secret-value", "https://example.com/?v=exact+secret",
	"https://example.com/\u0131cs", "https://sk-ant-xx.example.com/", "https://xox.example.com/?p=sk", "mailto:someone@example.com",
	"https://example.com/" + strings.Repeat("a/", prefilterMax),
}

func urlPrefilterDetectors(t testing.TB) []*Detector {
	exact := []Secret{{Label: "token", Value: "exact-secret-value"}, {Label: "spaced", Value: "exact secret"}}
	var ds []*Detector
	for _, kinds := range [][]Kind{nil, AllKinds()} {
		for _, loose := range []bool{false, true} {
			d, err := New(Options{Kinds: kinds, Loose: loose, Exact: exact})
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
	}
	return ds
}

// TestURLPrefilterChangesNothing compares ScanURL with and without the URL prefilter, for
// strict and loose detectors with and without high-entropy detection.
func TestURLPrefilterChangesNothing(t *testing.T) {
	for _, d := range urlPrefilterDetectors(t) {
		for _, u := range urlPrefilterCases {
			if got, want := d.scanURL(u, true), d.scanURL(u, false); !reflect.DeepEqual(got, want) {
				t.Errorf("loose=%v entropy=%v %q: with prefilter %+v, without %+v", d.loose, d.entropy, u, got, want)
			}
		}
	}
	d := MustDefault()
	for _, u := range []string{"https://pkg.go.dev/net/url", "https://example.com/a/b?x=1&y=two#frag"} {
		if !d.urlClean(u) {
			t.Errorf("urlClean(%q) = false, want true (an ordinary URL skips the full scan)", u)
		}
	}
	if d.urlClean("https://a:b@example.com/") || d.urlClean("https://example.com/%41KIA") || d.urlClean("https://"+strings.ToLower(awsKeyID)+".example.com/") {
		t.Error("urlClean holds for a URL with user information, an escape or a folded hint")
	}
}

// FuzzURLPrefilter: on any URL the prefilter changes no hit.
func FuzzURLPrefilter(f *testing.F) {
	for _, u := range urlPrefilterCases {
		f.Add(u)
	}
	ds := urlPrefilterDetectors(f)
	f.Fuzz(func(t *testing.T, u string) {
		for _, d := range ds {
			if got, want := d.scanURL(u, true), d.scanURL(u, false); !reflect.DeepEqual(got, want) {
				t.Fatalf("loose=%v entropy=%v %q: with prefilter %+v, without %+v", d.loose, d.entropy, u, got, want)
			}
		}
	})
}

// TestURLCleanBytesTable: the table urlClean reads holds, for every byte,
// what the per-byte tests it replaced computed (rule the prefilter out,
// base64 byte, fold).
func TestURLCleanBytesTable(t *testing.T) {
	for i := 0; i < 256; i++ {
		c := byte(i)
		x := urlCleanBytes[c]
		if out := c < 0x21 || c > 0x7e || c == '%' || c == '@'; out != (x == 0) {
			t.Fatalf("byte %#x: table %#x, rules out %v", c, x, out)
		}
		if x == 0 {
			continue
		}
		if (x&urlBase64 != 0) != isBase64Byte(c) || x&^urlBase64 != foldURLByte(c) {
			t.Fatalf("byte %#x: table %#x, base64 %v, fold %#x", c, x, isBase64Byte(c), foldURLByte(c))
		}
	}
}
