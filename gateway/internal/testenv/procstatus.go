package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStatusKiB reads one memory field of /proc/<pid>/status ("VmRSS",
// "VmHWM", …) in KiB; pid "self" is the test process. It fails where /proc
// or the field is missing, so a figure is never a silent zero.
func ProcStatusKiB(pid, field string) (int64, error) {
	st, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, fmt.Errorf("reading process status: %w", err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("process status %s: %w", field, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("process status of %s has no %s", pid, field)
}
