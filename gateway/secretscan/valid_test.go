package secretscan

import (
	"strings"
	"testing"
)

// Documentation URLs with placeholder passwords are not findings for
// decisions; the redaction (loose) still masks them.
func TestURLPasswordPlaceholders(t *testing.T) {
	strict, loose := MustDefault(), mustLoose(t)
	for _, u := range []string{
		"https://user:password@example.com/", "postgres://pgx_md5:secret@localhost:5432/db", "https://xxxxx:xxxxx@proxy.example.com:4443",
		"http://foo:bar@example.com", "https://u:${PASSWORD}@h/", "https://u:%s@h/", "https://test:test@localhost:8080",
		"redis://:changeme123@cache:6379", "https://u:aaaaaaaaaa@h/", "https://u:short@h/",
	} {
		if fs := strict.Scan(u); len(fs) != 0 {
			t.Errorf("strict Scan(%q) = %+v, want nothing", u, fs)
		}
		if fs := loose.Scan(u); len(fs) != 1 || fs[0].Kind != KindURLPassword {
			t.Errorf("loose Scan(%q) = %+v, want the password", u, fs)
		}
	}
	for _, u := range []string{"https://bob:hunter2hunter2@git.example.com/x", "postgres://app:N7q2vLx9pQ@db:5432/app"} {
		if fs := strict.Scan(u); len(fs) != 1 || fs[0].Kind != KindURLPassword {
			t.Errorf("strict Scan(%q) = %+v, want the password", u, fs)
		}
	}
}

func mustLoose(t *testing.T) *Detector {
	t.Helper()
	d, err := New(Options{Loose: true})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A query parameter whose name is a secret is never spelled out in the
// location of another finding.
func TestQueryNameSecretNotSpelledOut(t *testing.T) {
	key := "AKIA" + "IOSFODNN7EXAMPLE"
	hits := MustDefault().ScanURL("https://example.com/?" + key + "=" + "ghp_" + "aB3dE5fG7haB3dE5fG7haB3dE5fG7h123456")
	if len(hits) != 2 {
		t.Fatalf("hits = %+v", hits)
	}
	for _, h := range hits {
		if strings.Contains(h.Where, key) || strings.Contains(h.String(), "IOSFODNN") {
			t.Errorf("hit %q spells out the name", h)
		}
	}
}

// The opt-in entropy detector flags encoded data in URL parts, not long
// paths, slugs or hex digests.
func TestURLEntropyOpaque(t *testing.T) {
	d, err := New(Options{Kinds: []Kind{KindHighEntropy}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"https://example.com/x?d=Zk9xR2pLcW1WbjJ4ZUE3dDlZc0JoTHdQdU4zSg",
		"https://example.com/upload/aGVsbG8gd29ybGQgMTIzNDU2Nzg5MCBBQkNERUY",
	} {
		found := false
		for _, h := range d.ScanURL(u) {
			found = found || h.Kind == KindHighEntropy
		}
		if !found {
			t.Errorf("ScanURL(%q) found no high-entropy value", u)
		}
	}
	for _, u := range []string{
		"https://cloud.google.com/docs/reference/rest/v1/projects.locations.functions#parameters",
		"https://github.com/golang/go/commit/0123456789abcdef0123456789abcdef01234567",
		"https://example.com/sha256/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"https://bob:s3cretpassw0rd@example.com/", // a password is not this detector's
	} {
		if hits := d.ScanURL(u); len(hits) != 0 {
			t.Errorf("ScanURL(%q) = %+v, want nothing", u, hits)
		}
	}
}
