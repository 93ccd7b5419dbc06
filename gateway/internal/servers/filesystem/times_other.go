//go:build !linux

package filesystem

import (
	"io/fs"
	"syscall"
	"time"
)

// birthTime is unknown on this platform.
func birthTime(syscall.Conn) time.Time { return time.Time{} }

// accessTime is unknown on this platform.
func accessTime(fs.FileInfo) time.Time { return time.Time{} }
