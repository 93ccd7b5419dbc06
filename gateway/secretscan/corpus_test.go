package secretscan

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// corpusExts are the source and documentation files the false-positive
// measurement scans.
var corpusExts = map[string]bool{
	".go": true, ".s": true, ".c": true, ".h": true, ".cc": true, ".py": true, ".js": true, ".ts": true,
	".java": true, ".rs": true, ".proto": true, ".md": true, ".txt": true, ".json": true, ".yaml": true,
	".yml": true, ".toml": true, ".sh": true, ".html": true, ".mod": true, ".sum": true,
}

// TestCorpusFalsePositives measures the default detectors' hits on a large
// body of real source code that holds no secrets (docs/egress.md, "Secret
// scanning"). It runs only when IC_SECRETSCAN_CORPUS names a directory, for
// example the Go module cache:
//
//	IC_SECRETSCAN_CORPUS=$(go env GOMODCACHE) go test -run TestCorpusFalsePositives -v ./gateway/secretscan/
//
// It prints every hit (file, kind, masked excerpt) for inspection and the
// rate per 100 MB, and fails above IC_SECRETSCAN_MAX_PER_100MB when set.
func TestCorpusFalsePositives(t *testing.T) {
	root := os.Getenv("IC_SECRETSCAN_CORPUS")
	if root == "" {
		t.Skip("set IC_SECRETSCAN_CORPUS to a directory of source code to measure false positives")
	}
	d := MustDefault()
	var bytes, files int64
	var hits int
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skipped
		}
		if e.IsDir() {
			if e.Name() == "cache" && filepath.Dir(path) == filepath.Clean(root) {
				return filepath.SkipDir // the module cache's download cache (zips)
			}
			return nil
		}
		if !corpusExts[strings.ToLower(filepath.Ext(path))] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		files++
		bytes += int64(len(b))
		text := string(b)
		for _, f := range d.Scan(text) {
			hits++
			line := 1 + strings.Count(text[:f.Start], "\n")
			rel, _ := filepath.Rel(root, path)
			t.Logf("hit: %s:%d %s %s", rel, line, f.Kind, Mask(text, f))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mb := float64(bytes) / 1e6
	per100 := float64(hits) / mb * 100
	t.Logf("scanned %d files, %.1f MB: %d hits, %.2f per 100 MB", files, mb, hits, per100)
	if max := os.Getenv("IC_SECRETSCAN_MAX_PER_100MB"); max != "" {
		var limit float64
		if _, err := fmtSscan(max, &limit); err != nil {
			t.Fatalf("IC_SECRETSCAN_MAX_PER_100MB: %v", err)
		}
		if per100 > limit {
			t.Errorf("%.2f hits per 100 MB, want <= %v", per100, limit)
		}
	}
}

func fmtSscan(s string, f *float64) (int, error) { return fmt.Sscan(s, f) }

// urlInText finds http(s) URLs in source text.
var urlInText = regexp.MustCompile(`https?://[A-Za-z0-9][^\s"'<>()\[\]{}\x60\\]{3,1000}`)

// TestCorpusURLEntropy measures the opt-in high-entropy detector on the
// distinct URLs found in a source tree (IC_SECRETSCAN_CORPUS, as above):
// how many URLs real code and documentation name would be escalated by it.
//
//	IC_SECRETSCAN_CORPUS=$(go env GOMODCACHE) go test -run TestCorpusURLEntropy -v ./gateway/secretscan/
func TestCorpusURLEntropy(t *testing.T) {
	root := os.Getenv("IC_SECRETSCAN_CORPUS")
	if root == "" {
		t.Skip("set IC_SECRETSCAN_CORPUS to a directory of source code to measure false positives")
	}
	d, err := New(Options{Kinds: []Kind{KindHighEntropy}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	hosts := map[string]bool{}
	_ = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() {
			if e.Name() == "cache" && filepath.Dir(path) == filepath.Clean(root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !corpusExts[strings.ToLower(filepath.Ext(path))] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, u := range urlInText.FindAllString(string(b), -1) {
			seen[strings.TrimRight(u, ".,;:")] = true
		}
		return nil
	})
	var urlHits, hostHits int
	for u := range seen {
		for _, h := range d.ScanURL(u) {
			if strings.HasPrefix(h.Where, "host label") {
				if !hosts[u] {
					hostHits++
					hosts[u] = true
				}
			} else {
				urlHits++
			}
			if urlHits+hostHits <= 40 {
				t.Logf("hit: %s in %s (%s)", h.Kind, h.Where, Mask(u, Finding{Kind: KindHighEntropy, Start: 0, End: len(u)}))
			}
		}
	}
	t.Logf("%d distinct URLs: %d high-entropy hits in URL parts, %d URLs with a high-entropy host label (%.2f%% of URLs)",
		len(seen), urlHits, hostHits, float64(urlHits+hostHits)/float64(len(seen))*100)
}
