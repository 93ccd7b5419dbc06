package netlimit

import (
	"errors"
	"testing"
)

func TestPlanFiles(t *testing.T) {
	// The gateway's defaults: agent 4096/1024, ops 256/64, egress 1024/256.
	defaults := []FileDemand{
		{Name: "agent", Limits: Limits{MaxConns: 4096, MaxPerClient: 1024}, FilesPerConn: 2},
		{Name: "ops", Limits: Limits{MaxConns: 256, MaxPerClient: 64}, FilesPerConn: 1, Reserved: true},
		{Name: "egress", Limits: Limits{MaxConns: 1024, MaxPerClient: 256}, FilesPerConn: 2},
	}
	tests := []struct {
		name    string
		limit   uint64
		reserve int
		ds      []FileDemand
		want    []Limits
		reduced []bool
		wantErr error
	}{
		{name: "unknown limit keeps the caps", limit: 0, reserve: 144, ds: defaults,
			want: []Limits{{4096, 1024}, {256, 64}, {1024, 256}}, reduced: []bool{false, false, false}},
		{name: "a large limit keeps the caps", limit: 1 << 20, reserve: 144, ds: defaults,
			want: []Limits{{4096, 1024}, {256, 64}, {1024, 256}}, reduced: []bool{false, false, false}},
		{name: "RLIM_INFINITY keeps the caps", limit: ^uint64(0), reserve: 144, ds: defaults,
			want: []Limits{{4096, 1024}, {256, 64}, {1024, 256}}, reduced: []bool{false, false, false}},
		// 1024 - 144 = 880; ops: 880/4 = 220; of the rest, 660, agent and egress get one
		// connection each and the 656 left split 4:1 at two descriptors a connection.
		{name: "ulimit -n 1024", limit: 1024, reserve: 144, ds: defaults,
			want: []Limits{{263, 263}, {220, 64}, {66, 66}}, reduced: []bool{true, true, true}},
		// 512 - 144 = 368: ops 92, the rest 276 -> agent 109, egress 28.
		{name: "ulimit -n 512", limit: 512, reserve: 144, ds: defaults,
			want: []Limits{{109, 109}, {92, 64}, {28, 28}}, reduced: []bool{true, true, true}},
		// Exactly enough: 4096*2 + 256 + 1024*2 + 144 = 10640; one less cuts the two others.
		{name: "exactly the caps", limit: 10640, reserve: 144, ds: defaults,
			want: []Limits{{4096, 1024}, {256, 64}, {1024, 256}}, reduced: []bool{false, false, false}},
		{name: "one descriptor short", limit: 10639, reserve: 144, ds: defaults,
			want: []Limits{{4095, 1024}, {256, 64}, {1024, 256}}, reduced: []bool{true, false, false}},
		{name: "too low to serve", limit: 160, reserve: 144, ds: defaults, wantErr: ErrFileLimit},
		{name: "below the reserve", limit: 100, reserve: 144, ds: defaults, wantErr: ErrFileLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanFiles(tt.limit, tt.reserve, tt.ds)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v; want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			used := tt.reserve
			for i, p := range got {
				if p.Name != tt.ds[i].Name || p.Limits != tt.want[i] || p.Reduced != tt.reduced[i] {
					t.Errorf("%s: %+v; want %+v reduced=%v", tt.ds[i].Name, p, tt.want[i], tt.reduced[i])
				}
				if err := p.Limits.Validate(p.Name); err != nil {
					t.Errorf("%s: %v", p.Name, err)
				}
				used += p.Limits.MaxConns * tt.ds[i].FilesPerConn
			}
			if tt.limit > 0 && tt.limit < 1<<20 && uint64(used) > tt.limit {
				t.Errorf("the plan uses %d descriptors; the limit is %d", used, tt.limit)
			}
		})
	}
}

func TestPlanFilesRefusesBadDemands(t *testing.T) {
	for _, ds := range [][]FileDemand{
		{{Name: "a", Limits: Limits{MaxConns: 0, MaxPerClient: 1}, FilesPerConn: 1}},
		{{Name: "a", Limits: Limits{MaxConns: 4, MaxPerClient: 1}, FilesPerConn: 0}},
	} {
		if _, err := PlanFiles(1024, 0, ds); err == nil {
			t.Errorf("PlanFiles(%+v) accepted", ds)
		}
	}
	if _, err := PlanFiles(1024, -1, []FileDemand{{Name: "a", Limits: Limits{MaxConns: 4, MaxPerClient: 1}, FilesPerConn: 1}}); err == nil {
		t.Error("a negative reserve was accepted")
	}
}

// FuzzPlanFiles: whatever the limit and caps, the plan fits the limit, never raises a cap, and
// keeps every listener valid.
func FuzzPlanFiles(f *testing.F) {
	f.Add(uint64(1024), 144, 4096, 1024, 256, 64, 1024, 256)
	f.Add(uint64(200), 144, 1, 1, 1, 1, 1, 1)
	f.Fuzz(func(t *testing.T, limit uint64, reserve, a, ac, o, oc, e, ec int) {
		ds := []FileDemand{
			{Name: "agent", Limits: Limits{MaxConns: a, MaxPerClient: ac}, FilesPerConn: 2},
			{Name: "ops", Limits: Limits{MaxConns: o, MaxPerClient: oc}, FilesPerConn: 1, Reserved: true},
			{Name: "egress", Limits: Limits{MaxConns: e, MaxPerClient: ec}, FilesPerConn: 2},
		}
		for _, d := range ds {
			if d.Limits.Validate(d.Name) != nil || d.Limits.MaxConns > 1<<20 {
				return
			}
		}
		if reserve < 0 || reserve > 1<<20 {
			return
		}
		got, err := PlanFiles(limit, reserve, ds)
		if err != nil {
			return
		}
		used := uint64(reserve)
		for i, p := range got {
			if p.Limits.Validate(p.Name) != nil || p.Limits.MaxConns > ds[i].Limits.MaxConns || p.Limits.MaxPerClient > ds[i].Limits.MaxPerClient {
				t.Fatalf("%s: %+v from %+v", p.Name, p.Limits, ds[i].Limits)
			}
			if p.Reduced != (p.Limits.MaxConns < ds[i].Limits.MaxConns) {
				t.Fatalf("%s: Reduced %v for %+v from %+v", p.Name, p.Reduced, p.Limits, ds[i].Limits)
			}
			used += uint64(p.Limits.MaxConns * ds[i].FilesPerConn)
		}
		if limit > 0 && used > limit {
			t.Fatalf("the plan uses %d descriptors of %d", used, limit)
		}
	})
}
