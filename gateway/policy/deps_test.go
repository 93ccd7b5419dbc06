package policy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPurePackage is a repository rule: the policy package (which the
// compiler imports to verify rules) must not depend on HTTP, the database
// or MCP code.
func TestPurePackage(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not available")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"net/http", "github.com/jackc/pgx", "github.com/mark3labs/mcp-go", "github.com/modelcontextprotocol/go-sdk", "database/sql"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("gateway/policy depends on %s", dep)
			}
		}
	}
}
