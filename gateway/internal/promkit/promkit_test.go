package promkit

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	if err := Register(nil, "x", "hint", Counter("a_total", "a")); err != nil {
		t.Fatalf("nil registry: %v", err)
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg, "x", "hint", Counter("a_total", "a"), CounterVec("b_total", "b", "l")); err != nil {
		t.Fatal(err)
	}
	err := Register(reg, "x", "one per registry", Counter("a_total", "a"))
	if err == nil || !strings.HasPrefix(err.Error(), "registering x metrics: ") || !strings.HasSuffix(err.Error(), " (one per registry)") {
		t.Fatalf("twice: %v", err)
	}
	err = Register(reg, "x", "", Counter("a_total", "a"))
	if err == nil || strings.Contains(err.Error(), "(") {
		t.Fatalf("twice, no hint: %v", err)
	}
}
