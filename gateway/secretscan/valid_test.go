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
