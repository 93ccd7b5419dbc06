//go:build !unix

package policy

import (
	"io/fs"
	"os"
)

type osFS struct{}

func (osFS) Lstat(name string) (fs.FileMode, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return 0, err
	}
	return fi.Mode(), nil
}

func (osFS) Readlink(name string) (string, error) { return os.Readlink(name) }

func isNotDir(err error) bool { return false }
