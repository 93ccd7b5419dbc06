package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/gateway/policy"
)

// figureLatency is the simulated model latency of TestConcurrencyFigure:
// IRONCURTAIN_FIGURE_LATENCY (a Go duration, "2s" for the reported figure),
// else 200ms so that CI runs it in seconds.
func figureLatency(t *testing.T) time.Duration {
	v := os.Getenv("IRONCURTAIN_FIGURE_LATENCY")
	if v == "" {
		return 200 * time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("IRONCURTAIN_FIGURE_LATENCY: %v", err)
	}
	return d
}

type figureInput struct {
	name         string
	constitution string
	annotations  string // path relative to the repository root
}

// figureInputs are the shipped constitution with the shipped annotations,
// and the same constitution with the original IronCurtain's five-server
// annotations (213 tools, kept as test data by the policy package), the
// workload the original needs 16+ minutes for sequentially.
func figureInputs() []figureInput {
	return []figureInput{
		{name: "shipped", constitution: "compiler/constitution/base.md", annotations: "gateway/policies/base/tool-annotations.json"},
		{name: "original-five-servers", constitution: "compiler/constitution/base.md", annotations: "gateway/policy/testdata/original/generated/tool-annotations.json"},
	}
}

// TestConcurrencyFigure is the concurrency figure: a full compile against
// the fake model with a simulated latency, at concurrency 1 and 8 (each
// twice, interleaved; the faster run counts). It checks that concurrency
// pays off and logs the wall times:
//
//	IRONCURTAIN_FIGURE_LATENCY=2s go test ./pipeline -run TestConcurrencyFigure -v
func TestConcurrencyFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("timing figure")
	}
	latency := figureLatency(t)
	root := filepath.Join(testenv.Dir(), "..", "..")
	for _, in := range figureInputs() {
		t.Run(in.name, func(t *testing.T) {
			cb, err := os.ReadFile(filepath.Join(root, in.constitution))
			if err != nil {
				t.Fatalf("reading %s: %v", in.constitution, err)
			}
			path := filepath.Join(root, in.annotations)
			ab, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading %s: %v", in.annotations, err)
			}
			ann, err := policy.ParseAnnotations(path, ab)
			if err != nil {
				t.Fatal(err)
			}
			figure(t, latency, string(cb), ann, in)
		})
	}
}

func figure(t *testing.T, latency time.Duration, constitution string, ann *policy.Annotations, in figureInput) {
	ts := toolset.NewTools(ann)
	times := map[int]time.Duration{}
	calls := map[int]int{}
	overlap := map[int]int{}
	// Each concurrency runs twice, interleaved (1, 8, 8, 1), and the faster
	// run of each counts: a burst of other work on a shared machine (other
	// test binaries under -race) then slows one run, not the figure.
	for _, conc := range []int{1, 8, 8, 1} {
		srv := fakemodel.New(testenv.Synth(ts), fakemodel.WithLatency(latency))
		r := testenv.Runner(t, srv, testenv.RunnerOptions{Concurrency: conc})
		start := time.Now()
		res, err := Run(context.Background(), r, Config{Constitution: constitution, Annotations: ann, Settings: testenv.Settings(), Now: testenv.Now})
		if took := time.Since(start); times[conc] == 0 || took < times[conc] {
			times[conc] = took
		}
		if c := srv.Calls(); calls[conc] != 0 && calls[conc] != c {
			t.Errorf("concurrency %d: %d model calls, then %d", conc, calls[conc], c)
		}
		calls[conc] = srv.Calls()
		if o := srv.MaxInFlight(); o > overlap[conc] {
			overlap[conc] = o
		}
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Servers {
			if s.Err != nil {
				t.Errorf("%s: %v", s.Server, s.Err)
			}
		}
		if !res.Verified {
			report(t, res)
			t.Fatalf("concurrency %d: not verified", conc)
		}
	}
	if calls[1] != calls[8] {
		t.Errorf("model calls differ: %d sequential, %d concurrent", calls[1], calls[8])
	}
	speedup := float64(times[1]) / float64(times[8])
	t.Logf("figure %s: %s + %s: %d servers, %d tools, %d model calls, latency %v: concurrency 1: %v, concurrency 8: %v (%.1fx), most model calls at once: %d and %d",
		in.name, in.constitution, in.annotations, len(ts.Servers()), len(ts), calls[1], latency,
		times[1].Round(10*time.Millisecond), times[8].Round(10*time.Millisecond), speedup, overlap[1], overlap[8])
	// What concurrency buys is checked where it is decided, and exactly: the
	// sequential run never has two model calls waiting at once, the
	// concurrent one has at least four. The wall-clock ratio depends on what
	// else the machine runs (a 2-core CI runner with other -race binaries
	// measured 1.1x with the overlap intact), so it is enforced only on the
	// figure's own run, with IRONCURTAIN_FIGURE_LATENCY set.
	if overlap[1] != 1 {
		t.Errorf("concurrency 1: %d model calls were waiting at once; want 1", overlap[1])
	}
	if overlap[8] < 2 || overlap[8] > 8 {
		t.Errorf("concurrency 8: at most %d model calls were waiting at once; want 2 to 8", overlap[8])
	}
	if os.Getenv("IRONCURTAIN_FIGURE_LATENCY") != "" && speedup < 2 {
		t.Errorf("concurrency 8 is only %.1fx faster than 1; want at least 2x", speedup)
	}
}
