//go:build !unix

package policy

import "io/fs"

// statID cannot tell inodes here; osFS does not implement idFS either, so
// hard links are not recognised on such systems (the gateway runs on Linux).
func statID(fs.FileInfo) (fileID, bool) { return fileID{}, false }
