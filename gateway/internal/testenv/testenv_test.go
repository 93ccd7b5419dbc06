package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how the test would have ended.
type recorder struct {
	testing.TB
	ended string // "skip" or "fatal"
	msg   string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.ended, r.msg = "skip", fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.ended, r.msg = "fatal", fmt.Sprintf(format, args...)
}

func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		ci, want string
	}{
		{"true", "fatal"},
		{"", "skip"},
		{"false", "skip"},
		{"1", "skip"}, // only CI=true is CI, as before
	} {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv(EnvCI, tt.ci)
			r := &recorder{TB: t}
			Missing(r, "frob is not installed: %v", "not found")
			if r.ended != tt.want || !strings.HasPrefix(r.msg, "frob is not installed: not found") {
				t.Fatalf("ended %q with %q, want %q", r.ended, r.msg, tt.want)
			}
		})
	}
}

func TestRequire(t *testing.T) {
	t.Setenv(EnvCI, "true")
	r := &recorder{TB: t}
	if p := Require(r, "no-such-tool-ironcurtain", "sh"); p == "" || r.ended != "" {
		t.Fatalf("Require with an installed alternative = %q, ended %q %q", p, r.ended, r.msg)
	}
	r = &recorder{TB: t}
	if p := Require(r, "no-such-tool-ironcurtain"); p != "" || r.ended != "fatal" || !strings.Contains(r.msg, "no-such-tool-ironcurtain is not installed") {
		t.Fatalf("Require of a missing tool in CI = %q, ended %q %q", p, r.ended, r.msg)
	}
	t.Setenv(EnvCI, "")
	r = &recorder{TB: t}
	if Require(r, "gh-no-such"); r.ended != "skip" {
		t.Fatalf("Require of a missing tool outside CI ended %q, want skip", r.ended)
	}
}

func TestProcStatusKiB(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	for _, tt := range []struct {
		pid, field string
		ok         bool
	}{
		{"self", "VmRSS", true},
		{"self", "VmHWM", true},
		{"self", "NoSuchField", false},
		{"0", "VmRSS", false},
	} {
		n, err := ProcStatusKiB(tt.pid, tt.field)
		if (err == nil) != tt.ok || (tt.ok && n <= 0) {
			t.Errorf("ProcStatusKiB(%q, %q) = %d, %v", tt.pid, tt.field, n, err)
		}
	}
}
