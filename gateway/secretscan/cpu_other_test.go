//go:build !unix

package secretscan

import "time"

// processCPU is not measured here: the CPU metrics report 0.
func processCPU() time.Duration { return 0 }
