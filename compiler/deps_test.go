package compiler

import (
	"os/exec"
	"strings"
	"testing"
)

// productMCPSDK is the one MCP SDK the compiler's program uses (as the
// gateway and the agent do); the official go-sdk is a test dependency only,
// the independent server of internal/testenv that annotate lists in tests.
const (
	productMCPSDK = "github.com/mark3labs/mcp-go/"
	officialSDK   = "github.com/modelcontextprotocol/go-sdk"
)

// TestOneMCPSDKInBinaries walks `go list -deps ./cmd/...` (the compiler's
// program, tests excluded) and fails when the official go-sdk is linked,
// or when mcp-go is not (the walk would be checking nothing).
func TestOneMCPSDKInBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "./cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	mcpGo := false
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == officialSDK || strings.HasPrefix(pkg, officialSDK+"/") {
			t.Errorf("the compiler links %s; product code uses %s only", pkg, productMCPSDK)
		}
		if strings.HasPrefix(pkg, productMCPSDK) {
			mcpGo = true
		}
	}
	if !mcpGo {
		t.Errorf("the compiler does not link %s; is ./cmd/... still the compiler's program?", productMCPSDK)
	}
}
