//go:build !unix

package gitremote

type fingerprint struct{}

// statFingerprint cannot see change times here: nothing is cached.
func statFingerprint(string) (fingerprint, bool) { return fingerprint{}, false }

func (fingerprint) racy(int64) bool { return true }

func (fingerprint) symlink() bool { return true }
