//go:build darwin || freebsd || netbsd

package gitremote

import "syscall"

// The stat timestamps are named Mtimespec and Ctimespec on the BSDs that
// kept the old names.
func mtimeNano(st *syscall.Stat_t) int64 { return st.Mtimespec.Nano() }
func ctimeNano(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
