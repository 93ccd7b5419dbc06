package autoapprove

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoDoor: the auto-approver is not a door and imports none; it
// reaches the model with llmprovider and the official SDKs.
func TestImportsNoDoor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-test", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	sdk := false
	for _, pkg := range pkgs {
		if strings.HasPrefix(pkg, "ironcurtain.dev/gateway/internal/doors/") {
			t.Errorf("autoapprove links the door %s", pkg)
		}
		sdk = sdk || pkg == "github.com/anthropics/anthropic-sdk-go"
	}
	if !sdk {
		t.Errorf("autoapprove does not link the Anthropic SDK; is the walk broken? (%d packages)", len(pkgs))
	}
}
