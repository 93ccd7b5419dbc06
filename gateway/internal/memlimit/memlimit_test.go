package memlimit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"
)

func TestApply(t *testing.T) {
	v2 := func(path, max string) fstest.MapFS {
		return fstest.MapFS{
			"proc/self/cgroup":                     {Data: []byte("0::" + path + "\n")},
			"sys/fs/cgroup/memory.max":             {Data: []byte("max\n")},
			"sys/fs/cgroup" + path + "/memory.max": {Data: []byte(max + "\n")},
		}
	}
	tests := []struct {
		name   string
		fs     fstest.MapFS
		env    string
		want   int64
		logged string
	}{
		{name: "v2 at the root", fs: fstest.MapFS{"proc/self/cgroup": {Data: []byte("0::/\n")}, "sys/fs/cgroup/memory.max": {Data: []byte("1073741824\n")}},
			want: 966367641, logged: "derived from the container"},
		{name: "v2 nested", fs: v2("/kubepods/pod1/c1", "536870912"), want: 483183820},
		{name: "v2 ancestor smaller", fs: func() fstest.MapFS {
			m := v2("/a/b", "max")
			m["sys/fs/cgroup/a/memory.max"] = &fstest.MapFile{Data: []byte("2147483648")}
			return m
		}(), want: 1932735283},
		{name: "v2 no limit", fs: v2("/a", "max"), want: 0, logged: "no container memory limit"},
		{name: "v1", fs: fstest.MapFS{"proc/self/cgroup": {Data: []byte("4:memory:/docker/x\n")}, "sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("268435456\n")}},
			want: 241591910},
		{name: "v1 unlimited", fs: fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")}}, want: 0},
		{name: "no cgroup fs", fs: fstest.MapFS{}, want: 0},
		{name: "garbage", fs: fstest.MapFS{"proc/self/cgroup": {Data: []byte("0::/\n")}, "sys/fs/cgroup/memory.max": {Data: []byte("lots\n")}},
			want: 0, logged: "not a number"},
		{name: "GOMEMLIMIT wins", fs: v2("/a", "536870912"), env: "300MiB", want: 0, logged: "set by GOMEMLIMIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var set int64 = -1
			got := apply(tt.fs, func(k string) string {
				if k == "GOMEMLIMIT" {
					return tt.env
				}
				return ""
			}, slog.New(slog.NewTextHandler(&buf, nil)), func(n int64) int64 { set = n; return 0 })
			if got != tt.want {
				t.Fatalf("limit = %d, want %d (log %s)", got, tt.want, buf.String())
			}
			if (set != -1) != (tt.want != 0) || (tt.want != 0 && set != tt.want) {
				t.Fatalf("runtime limit set to %d, want %d", set, tt.want)
			}
			if !strings.Contains(buf.String(), tt.logged) {
				t.Errorf("log %q lacks %q", buf.String(), tt.logged)
			}
		})
	}
}

// FuzzLimit: any cgroup file content yields a positive limit or none,
// never a panic.
func FuzzLimit(f *testing.F) {
	for _, s := range []string{"max", "1073741824", "-1", "0", "9223372036854771712", "12abc", " 5 \n"} {
		f.Add("0::/a/../b", s)
	}
	f.Fuzz(func(t *testing.T, cgroup, max string) {
		fsys := fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte(cgroup)},
			"sys/fs/cgroup/memory.max": {Data: []byte(max)},
		}
		n, _, ok, _ := Limit(fsys)
		if ok && n <= 0 {
			t.Fatalf("limit %d from %q", n, max)
		}
	})
}
