package secretscan

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

// Sample secrets are assembled at run time so that the repository holds none in one piece.
var (
	awsKeyID     = "AKIA" + "IOSFODNN7EXAMPLE"
	awsSecret    = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
	ghToken      = "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "123456"
	ghPAT        = "github_pat_" + "11ABCDEFG0" + strings.Repeat("xY9", 20)
	glToken      = "glpat-" + "Abcdefghij1234567890"
	slackToken   = "xoxb-" + "1234567890-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
	slackHook    = "https://hooks.slack.com/services/" + "T0ABCDEFG/B0ABCDEFG/" + "abcdefghijABCDEFGHIJ1234"
	anthropicKey = "sk-ant-" + "api03-" + strings.Repeat("Zx8_Qw-Er", 10)
	openAIKey    = "sk-" + "proj-" + strings.Repeat("Ab1Cd2Ef3G", 6)
	openAILegacy = "sk-" + strings.Repeat("a1B2c3D4", 6)
	googleKey    = "AIza" + "SyA-1234567890abcdefghijklmnopqrstu"
	jwt          = "eyJ" + "hbGciOiJIUzI1NiJ9" + ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	sessionToken = "icsess_" + strings.Repeat("Qw3-_zX9aB", 4) + "k7P"
	privateKey   = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + strings.Repeat("MIIEowIBAAKCAQEAx1y2z3", 4) + "\n-----END RSA PRIVATE KEY-----"
)

func TestScanFindsEachKind(t *testing.T) {
	d := MustDefault()
	tests := []struct {
		name   string
		text   string
		want   Kind
		secret string // the bytes the finding must cover exactly
	}{
		{name: "aws key id", text: "id=" + awsKeyID + " ", want: KindAWSKeyID, secret: awsKeyID},
		{name: "aws secret assignment", text: "aws_secret_access_key = " + awsSecret + "\n", want: KindAWSSecret, secret: awsSecret},
		{name: "aws secret json", text: `{"AWS_SECRET_ACCESS_KEY": "` + awsSecret + `"}`, want: KindAWSSecret, secret: awsSecret},
		{name: "github classic", text: "token " + ghToken + ".", want: KindGitHubToken, secret: ghToken},
		{name: "github fine-grained", text: ghPAT, want: KindGitHubPAT, secret: ghPAT},
		{name: "gitlab", text: "x " + glToken, want: KindGitLabToken, secret: glToken},
		{name: "slack token", text: slackToken, want: KindSlackToken, secret: slackToken},
		{name: "slack webhook", text: "post to " + slackHook, want: KindSlackWebhook, secret: strings.TrimPrefix(slackHook, "https://")},
		{name: "anthropic", text: "key: " + anthropicKey, want: KindAnthropicKey, secret: anthropicKey},
		{name: "openai project", text: "OPENAI=" + openAIKey, want: KindOpenAIKey, secret: openAIKey},
		{name: "openai legacy", text: openAILegacy + " x", want: KindOpenAIKey, secret: openAILegacy},
		{name: "google", text: "k=" + googleKey + "&", want: KindGoogleAPIKey, secret: googleKey},
		{name: "google at end", text: googleKey, want: KindGoogleAPIKey, secret: googleKey},
		{name: "jwt", text: "Authorization: Bearer " + jwt, want: KindJWT, secret: jwt},
		{name: "minted session token", text: "Bearer " + sessionToken + "\n", want: KindSessionToken, secret: sessionToken},
		{name: "minted session token at end", text: "t=" + sessionToken, want: KindSessionToken, secret: sessionToken},
		{name: "url password", text: "clone https://bob:hunter2hunter2@git.example.com/x", want: KindURLPassword, secret: "hunter2hunter2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := d.Scan(tc.text)
			if len(fs) != 1 {
				t.Fatalf("Scan found %d secrets, want 1: %+v", len(fs), fs)
			}
			f := fs[0]
			if f.Kind != tc.want {
				t.Errorf("kind = %s, want %s", f.Kind, tc.want)
			}
			if got := tc.text[f.Start:f.End]; got != tc.secret {
				t.Errorf("finding covers %q, want %q", got, tc.secret)
			}
		})
	}
}

func TestScanPrivateKey(t *testing.T) {
	fs := MustDefault().Scan("here:\n" + privateKey + "\n")
	if len(fs) != 1 || fs[0].Kind != KindPrivateKey {
		t.Fatalf("Scan = %+v, want one private key", fs)
	}
}

// Text that resembles a secret but is not one must not be reported: the false positives a
// code reviewer would see.
func TestScanIgnoresLookalikes(t *testing.T) {
	d := MustDefault()
	for _, text := range []string{
		"",
		"the task-list and desk-top items",
		"ghp_short",
		"AKIAshort and AKIA" + "iosfodnn7example (lower case)",
		"-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----", // a header with no key
		"if strings.HasPrefix(s, \"-----BEGIN PRIVATE KEY-----\") {",
		"https://example.com/path?q=search+terms#frag",
		"http://user@example.com/",                   // no password
		"postgres://localhost:5432/db",               // a port, not a password
		"aws_secret_access_key = os.Getenv(\"AWS\")", // not a literal key
		"eyJhbGciOi", // a JWT header alone
		"sk-" + "ant-short",
		"xoxb-notatoken",
		"icsess_short", "TokenPrefix = \"icsess_\"",
		"icsess_" + strings.Repeat("a", 44), // one character too long: not a minted token
	} {
		if fs := d.Scan(text); len(fs) != 0 {
			t.Errorf("Scan(%q) = %+v, want nothing", text, fs)
		}
	}
}

func TestScanOverlapReportedOnce(t *testing.T) {
	// An Anthropic key also starts with "sk-": reported once, as Anthropic.
	fs := MustDefault().Scan(anthropicKey)
	if len(fs) != 1 || fs[0].Kind != KindAnthropicKey {
		t.Fatalf("Scan = %+v, want one anthropic key", fs)
	}
}

func TestScanBoundsFindings(t *testing.T) {
	text := strings.Repeat(awsKeyID+" ", 1000)
	if fs := MustDefault().Scan(text); len(fs) != maxFindings {
		t.Fatalf("Scan found %d, want the bound %d", len(fs), maxFindings)
	}
}

func TestExactSecrets(t *testing.T) {
	agentToken := "ic-agent-" + strings.Repeat("q", 24)
	d, err := New(Options{Exact: []Secret{{Label: "agent token", Value: agentToken}}})
	if err != nil {
		t.Fatal(err)
	}
	text := "prefix" + agentToken + "suffix"
	fs := d.Scan(text)
	if len(fs) != 1 || fs[0].Kind != KindExact || fs[0].Label != "agent token" {
		t.Fatalf("Scan = %+v, want the agent token", fs)
	}
	if m := Mask(text, fs[0]); strings.Contains(m, "qqqq") || m != "[agent token]" {
		t.Errorf("Mask shows %q: no part of a gateway secret may be shown", m)
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "unknown kind", opts: Options{Kinds: []Kind{"aws"}}, want: `unknown secret detector "aws"`},
		{name: "short exact", opts: Options{Exact: []Secret{{Label: "x", Value: "short"}}}, want: "shorter than 8"},
		{name: "unlabelled exact", opts: Options{Exact: []Secret{{Value: "longenoughvalue"}}}, want: "no label"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestKindsSelectDetectors(t *testing.T) {
	d, err := New(Options{Kinds: []Kind{KindGitHubToken}})
	if err != nil {
		t.Fatal(err)
	}
	if fs := d.Scan(awsKeyID + " " + ghToken); len(fs) != 1 || fs[0].Kind != KindGitHubToken {
		t.Fatalf("Scan = %+v, want only the GitHub token", fs)
	}
}

func TestMask(t *testing.T) {
	text := "x " + awsKeyID
	fs := MustDefault().Scan(text)
	if len(fs) != 1 {
		t.Fatalf("Scan = %+v", fs)
	}
	if got, want := Mask(text, fs[0]), "AKIA…MPLE"; got != want {
		t.Errorf("Mask = %q, want %q", got, want)
	}
	if got := Mask("short", Finding{Kind: KindURLPassword, Start: 0, End: 5}); got != "[url-password]" {
		t.Errorf("Mask of a short value = %q, want the kind only", got)
	}
	if got := Mask("\u202eabcdefghijklmnopq\u200b", Finding{Kind: KindJWT, Start: 0, End: len("\u202eabcdefghijklmnopq\u200b")}); strings.ContainsAny(got, "\u202e\u200b") {
		t.Errorf("Mask = %q: control characters reach the operator", got)
	}
}

func TestScanURL(t *testing.T) {
	d := MustDefault()
	b64 := base64.StdEncoding.EncodeToString([]byte("creds " + awsKeyID + " " + awsSecret))
	tests := []struct {
		name  string
		url   string
		kind  Kind
		where string
	}{
		{name: "query", url: "https://github.com/search?q=" + awsKeyID, kind: KindAWSKeyID, where: "query parameter q"},
		{name: "query percent-encoded", url: "https://github.com/search?q=" + url.QueryEscape("key "+ghToken), kind: KindGitHubToken, where: "query parameter q"},
		{name: "query base64", url: "https://gist.githubusercontent.com/someone/x/raw?d=" + url.QueryEscape(b64), kind: KindAWSKeyID, where: "query parameter d (base64)"},
		{name: "path", url: "https://example.com/" + ghToken + "/x", kind: KindGitHubToken, where: "path"},
		{name: "path base64", url: "https://example.com/a/" + base64.RawURLEncoding.EncodeToString([]byte("t="+ghToken)), kind: KindGitHubToken, where: "path (base64)"},
		{name: "fragment", url: "https://example.com/#" + jwt, kind: KindJWT, where: "fragment"},
		{name: "userinfo", url: "https://bob:s3cretpassw0rd@example.com/", kind: KindURLPassword, where: "user information"},
		{name: "unparsable", url: "https://exa mple.com/%zz?" + awsKeyID, kind: KindAWSKeyID, where: "url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits := d.ScanURL(tc.url)
			for _, h := range hits {
				if h.Kind == tc.kind && h.Where == tc.where {
					if strings.Contains(h.String(), strings.TrimPrefix(awsKeyID, "AKIA")[:8]) {
						t.Errorf("hit %q shows the secret", h)
					}
					return
				}
			}
			t.Fatalf("ScanURL(%q) = %+v, want %s in %s", tc.url, hits, tc.kind, tc.where)
		})
	}
	for _, clean := range []string{
		"https://github.com/search?q=golang+context+cancel&type=code",
		"https://pkg.go.dev/net/http#Server",
		"https://example.com/a/b/c.tar.gz?sha=0123456789abcdef0123456789abcdef01234567",
	} {
		if hits := d.ScanURL(clean); len(hits) != 0 {
			t.Errorf("ScanURL(%q) = %+v, want nothing", clean, hits)
		}
	}
}

func TestHighEntropyIsOptIn(t *testing.T) {
	label := "mzxw6ytboi4dsnzsgq2tmnzyhe3tqmbrgiztinjwg4"
	host := label + ".exfil.example.net"
	opaque := "https://example.com/x?d=Zk9xR2pLcW1WbjJ4ZUE3dDlZc0JoTHdQdU4zSg"
	if hits := MustDefault().ScanHost(host); len(hits) != 0 {
		t.Fatalf("default ScanHost = %+v, want nothing (entropy is off by default)", hits)
	}
	d, err := New(Options{Kinds: append(DefaultKinds(), KindHighEntropy)})
	if err != nil {
		t.Fatal(err)
	}
	if hits := d.ScanHost(host); len(hits) != 1 || hits[0].Kind != KindHighEntropy || hits[0].Where != "host label 1" {
		t.Fatalf("ScanHost = %+v, want the first label", hits)
	}
	if hits := d.ScanHost("www.example.com"); len(hits) != 0 {
		t.Fatalf("ScanHost(www.example.com) = %+v", hits)
	}
	found := false
	for _, h := range d.ScanURL(opaque) {
		found = found || h.Kind == KindHighEntropy
	}
	if !found {
		t.Fatalf("ScanURL(%q) found no high-entropy value", opaque)
	}
}

// FuzzScan checks the detector's contract on any input: findings are in bounds, ordered,
// disjoint, bounded in number, and their masks never contain the value's middle.
func FuzzScan(f *testing.F) {
	for _, s := range []string{"", awsKeyID, ghToken, jwt, privateKey, slackHook, "https://a:b@c/", "aws_secret_key=" + awsSecret, "\xff\x00eyJ"} {
		f.Add(s)
	}
	d, err := New(Options{Kinds: AllKinds(), Exact: []Secret{{Label: "token", Value: "exact-secret-value"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs := d.Scan(s)
		if len(fs) > maxFindings {
			t.Fatalf("%d findings, bound is %d", len(fs), maxFindings)
		}
		prevEnd := 0
		for _, x := range fs {
			if x.Start < prevEnd || x.End <= x.Start || x.End > len(s) {
				t.Fatalf("finding %+v out of order or bounds (len %d, previous end %d)", x, len(s), prevEnd)
			}
			prevEnd = x.End
			m := Mask(s, x)
			if v := s[x.Start:x.End]; len(v) >= 16 && strings.Contains(m, v[4:len(v)-4]) && len(v[4:len(v)-4]) > 2 {
				t.Fatalf("Mask %q shows the middle of the value", m)
			}
		}
		_ = d.ScanURL(s)
		_ = d.ScanHost(s)
	})
}

// FuzzIndexHint checks the pivot search against strings.Index.
func FuzzIndexHint(f *testing.F) {
	f.Add("xx://yy", "://")
	f.Add("ghp_ghp_", "ghp_")
	f.Add("aaa", "aaaa")
	f.Fuzz(func(t *testing.T, text, hint string) {
		if hint == "" {
			return
		}
		if got, want := indexHint(text, hint, rarestByte(hint)), strings.Index(text, hint); got != want {
			t.Fatalf("indexHint(%q, %q) = %d, strings.Index = %d", text, hint, got, want)
		}
	})
}

// A host name is case-insensitive: what the agent wrote is lower-cased before a resolver
// sees it. ScanHost finds the formats however the labels are cased, and the exact values
// ignoring case; elsewhere (paths, bodies) case still matters.
func TestScanHostCase(t *testing.T) {
	key := "AKIA" + "IOSFODNN7EXAMPLE"
	d, err := New(Options{Exact: []Secret{{Label: "github token", Value: "GW0F3A9C1B7E5D42A8"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host string
		want Kind // "" for nothing
	}{
		{host: key + ".example.com", want: KindAWSKeyID},
		{host: strings.ToLower(key) + ".example.com", want: KindAWSKeyID},
		{host: "AkIa" + strings.ToLower(key[4:]) + ".Example.COM", want: KindAWSKeyID},
		{host: "x-gw0f3a9c1b7e5d42a8.example.com", want: KindExact},
		{host: "x-Gw0F3a9C1b7E5d42A8.example.com", want: KindExact},
		{host: "akia.example.com"},
		{host: "www.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			hits := d.ScanHost(tt.host)
			if tt.want == "" {
				if len(hits) != 0 {
					t.Fatalf("ScanHost = %+v; want nothing", hits)
				}
				return
			}
			if len(hits) != 1 || hits[0].Kind != tt.want || hits[0].Where != "host name" {
				t.Fatalf("ScanHost = %+v; want one %s in the host name", hits, tt.want)
			}
			if strings.Contains(strings.ToLower(hits[0].Excerpt), "iosfodnn") || strings.Contains(strings.ToLower(hits[0].Excerpt), "0f3a9c") {
				t.Fatalf("the excerpt shows the value: %q", hits[0].Excerpt)
			}
		})
	}
	if hits := d.ScanText("body", strings.ToLower(key)); len(hits) != 0 {
		t.Fatalf("ScanText folds case: %+v", hits)
	}
}
