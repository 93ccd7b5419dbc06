//go:build unix && !darwin && !freebsd && !netbsd

package gitremote

import "syscall"

// The stat timestamps are named Mtim and Ctim on Linux and most unixes.
func mtimeNano(st *syscall.Stat_t) int64 { return st.Mtim.Nano() }
func ctimeNano(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }
