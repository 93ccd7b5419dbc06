//go:build !unix

package gitexec

import "errors"

// ReadRegularFile is only implemented for unix: elsewhere it always fails
// (and the native config reader is never sure, so git is always run).
func ReadRegularFile(path string, max int64) ([]byte, bool, error) {
	return nil, false, errors.New("reading files without following links is not supported on this system")
}

func searchable(string) bool { return false }
