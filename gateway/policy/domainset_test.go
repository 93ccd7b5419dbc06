package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/netpolicy"
)

// manyDomains is a list of n patterns past linearSetMax, mixing exact
// names, suffixes, an IP literal and host/owner/repo entries.
func manyDomains(n int) []string {
	out := []string{"*.github.com", "192.0.2.10", "git.example/acme/app", "[2001:db8::1]"}
	for i := len(out); i < n; i++ {
		switch i % 10 {
		case 0:
			out = append(out, fmt.Sprintf("*.zone%d.example", i))
		default:
			out = append(out, fmt.Sprintf("host%d.example.org", i))
		}
	}
	return out
}

func mustSet(t testing.TB, list []string) domainSet {
	t.Helper()
	ps, err := parseDomainPatterns(list)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newDomainSet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func value(t testing.TB, host, path string) domainValue {
	t.Helper()
	h, err := netpolicy.ParseHost(host)
	if err != nil {
		t.Fatal(err)
	}
	return domainValue{host: h, path: path}
}

func TestDomainSet(t *testing.T) {
	big := mustSet(t, manyDomains(100))
	if big.exact == nil {
		t.Fatal("a list of 100 is not indexed")
	}
	withAny := mustSet(t, append(manyDomains(20), "*"))
	small := mustSet(t, []string{"*.github.com", "pkg.go.dev"})
	if small.exact != nil {
		t.Fatal("a list of 2 is indexed")
	}
	tests := []struct {
		name       string
		set        domainSet
		host, path string
		want       bool
	}{
		{"exact", big, "host11.example.org", "", true},
		{"exact not listed", big, "host11.example.com", "", false},
		{"suffix itself", big, "github.com", "", true},
		{"suffix sub", big, "api.github.com", "", true},
		{"suffix deep", big, "a.b.c.github.com", "", true},
		{"suffix no dot boundary", big, "evilgithub.com", "", false},
		{"suffix of exact is not a wildcard", big, "x.host11.example.org", "", false},
		{"zone suffix", big, "www.zone10.example", "", true},
		{"ip exact", big, "192.0.2.10", "", true},
		{"ip other", big, "192.0.2.11", "", false},
		{"ipv6 exact", big, "2001:db8::1", "", true},
		{"repo path", big, "git.example", "acme/app", true},
		{"repo path case", big, "git.example", "ACME/App", true},
		{"repo other path", big, "git.example", "acme/other", false},
		{"repo host alone", big, "git.example", "", false},
		{"any name", withAny, "anything.example", "", true},
		{"any never an ip", withAny, "198.51.100.1", "", false},
		{"small suffix", small, "x.github.com", "", true},
		{"small miss", small, "go.dev", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := value(t, tt.host, tt.path)
			if got := tt.set.match(d); got != tt.want {
				t.Fatalf("match(%s) = %v, want %v", d, got, tt.want)
			}
			if lin := matchDomain(tt.set.patterns, d); lin != tt.want {
				t.Fatalf("linear match(%s) = %v, want %v", d, lin, tt.want)
			}
		})
	}
	if empty := (domainSet{}); empty.match(domainValue{}) {
		t.Fatal("the empty set matched the zero value")
	}
}

// FuzzDomainSetMatchesLinear: the index matches exactly what the ordered
// scan over the same patterns matches.
func FuzzDomainSetMatchesLinear(f *testing.F) {
	for _, s := range []string{"github.com", "api.github.com", "evilgithub.com", "192.0.2.10", "zone10.example", "a.zone10.example", "git.example", "host5.example.org", "", "com", "xn--bcher-kva.example"} {
		f.Add(s, "")
		f.Add(s, "acme/app")
	}
	list := append(manyDomains(40), "bücher.example", "*.com.example", "example")
	set := mustSet(f, list)
	withAny := mustSet(f, append(list, "*"))
	f.Fuzz(func(t *testing.T, host, path string) {
		h, err := netpolicy.ParseHost(host)
		if err != nil {
			return
		}
		d := domainValue{host: h, path: path}
		for _, s := range []domainSet{set, withAny} {
			if got, want := s.match(d), matchDomain(s.patterns, d); got != want {
				t.Fatalf("index says %v, the scan %v for %s", got, want, d)
			}
		}
	})
}

// listEngine is an engine whose one fetch rule allows the URLs of a
// dynamic list of n domains (as the compiler writes them: "@list").
func listEngine(b *testing.B, n int) *Engine {
	b.Helper()
	dir := b.TempDir()
	domains := manyDomains(n)
	lists, _ := json.Marshal(DynamicLists{GeneratedAt: "2026-05-01T00:00:00.000Z", Lists: map[string]ResolvedList{
		"dev-sites": {Values: domains, ManualAdditions: []string{}, ManualRemovals: []string{}}}})
	pol := strings.Replace(secretsPolicy, `"allowed": ["blocked.example"]}}, "then": "deny"`, `"allowed": ["@dev-sites"]}}, "then": "allow"`, 1)
	for name, content := range map[string]string{
		CompiledPolicyFile: pol,
		AnnotationsFile:    secretsAnnotations,
		DynamicListsFile:   string(lists),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	e, err := LoadDir(dir, Settings{Sandbox: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkEvaluateDynamicList: a fetch judged against a dynamic list of
// 1,000 and 100,000 domains, for a listed host (the last entry, the worst
// case for a scan) and an unlisted one. The original TypeScript engine
// takes 20.7 µs (1,000) and 1,003 µs (100,000) here. Besides the time it
// reports the CPU time per evaluation (cpu-ns/op) and the heap the loaded
// engine holds (engine-B: live heap after loading, less before).
func BenchmarkEvaluateDynamicList(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		last := manyDomains(n)[n-1]
		for _, c := range []struct {
			name, url string
		}{{"listed", "https://" + last + "/x"}, {"unlisted", "https://unlisted.example.net/x"}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, c.name), func(b *testing.B) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				e := listEngine(b, n)
				runtime.GC()
				runtime.ReadMemStats(&after)
				req := Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": c.url}}
				want := "allow-fetch" // the unlisted URL falls through to the plain allow
				if c.name == "listed" {
					want = "deny-fetch-blocked" // the rule's name is kept; it now allows
				}
				if d := e.Evaluate(context.Background(), req).Decision; d.Status != Allow || d.Rule != want {
					b.Fatalf("decision = %+v, want allow by %s", d, want)
				}
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					e.Evaluate(context.Background(), req)
				}
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "engine-B")
			})
		}
	}
}
