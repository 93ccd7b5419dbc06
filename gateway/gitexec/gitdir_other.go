//go:build !linux

package gitexec

// checkTree walks dir with filepath.WalkDir.
func checkTree(dir string, tops map[string]bool, count *int) error {
	return walkTree(dir, tops, count)
}
