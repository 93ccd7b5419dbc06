package stack

import (
	"os"
	"testing"

	"ironcurtain.dev/e2e/internal/tcenv"
)

func TestMain(m *testing.M) {
	tcenv.NoReaper()
	os.Exit(m.Run())
}
