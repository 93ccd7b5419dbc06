package main

import (
	"fmt"
	"os"
	"syscall"
)

// forkBomb starts up to n sleeping processes, as fast as it can, until
// starting one fails (the pids limit); then it kills and reaps them and
// prints "<started> <error>". Its output is written with plain syscalls
// (no new thread is needed once the limit is reached).
func forkBomb(n int) int {
	var pids []int
	var ferr error
	for len(pids) < n {
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "120"}, &syscall.ProcAttr{})
		if err != nil {
			ferr = err
			break
		}
		pids = append(pids, pid)
		if len(pids)%8 == 0 {
			fmt.Fprintf(os.Stdout, "%d progress\n", len(pids))
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	for _, p := range pids {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(p, &ws, 0, nil)
	}
	fmt.Fprintf(os.Stdout, "%d started, then: %v\n", len(pids), ferr)
	return 0
}

// alloc allocates and touches mib MiB, printing the running total every
// 16 MiB; the memory limit should kill it first (it offers itself to the
// OOM killer).
func alloc(mib int) int {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	var keep [][]byte
	for i := 1; i <= mib; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		keep = append(keep, b)
		if i%16 == 0 {
			fmt.Fprintf(os.Stdout, "%d MiB allocated\n", i)
		}
	}
	fmt.Fprintf(os.Stdout, "%d MiB allocated, all of it\n", len(keep))
	return 0
}
