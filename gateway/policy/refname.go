package policy

import (
	"fmt"
	"strings"
)

// CheckUpdateRef reports why name cannot be the target of a ref update
// received over the wire (a receive-pack command), or nil. The name must be
// a full ref under refs/heads/ or refs/tags/ that passes git
// check-ref-format, ASCII only, with its namespace prefixes written in
// lower case ("refs/Heads/main" and "Refs/heads/main" are refused: a
// case-insensitive ref store could read them as a protected branch).
func CheckUpdateRef(name string) error {
	if !validRefName(name, false, false) {
		return fmt.Errorf("%q is not a valid ref name", name)
	}
	if err := checkPrefixCase(name); err != nil {
		return err
	}
	rest := strings.TrimPrefix(name, "refs/")
	if err := checkPrefixCase(rest); err != nil {
		return err
	}
	if !strings.HasPrefix(name, "refs/heads/") && !strings.HasPrefix(name, "refs/tags/") {
		return fmt.Errorf("%q is outside refs/heads/ and refs/tags/", name)
	}
	return nil
}
