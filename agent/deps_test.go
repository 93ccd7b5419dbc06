package agent

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// forbiddenImports are import-path prefixes the agent module's programs must
// never link: databases, the gateway (which holds the secrets), secret
// stores and keyrings, cloud identity and credential SDKs, SSH key
// handling, and API clients that need real credentials.
var forbiddenImports = []string{
	"ironcurtain.dev/gateway",
	"ironcurtain.dev/migrations",
	"database/sql",
	"github.com/jackc/",
	"github.com/lib/pq",
	"github.com/go-sql-driver/",
	"github.com/mattn/go-sqlite3",
	"modernc.org/sqlite",
	"go.mongodb.org/",
	"github.com/redis/",
	"github.com/go-redis/",
	"github.com/hashicorp/vault",
	"cloud.google.com/go/secretmanager",
	"cloud.google.com/go/auth",
	"cloud.google.com/go/compute/metadata",
	"golang.org/x/oauth2/google",
	"github.com/aws/",
	"github.com/Azure/azure-sdk-for-go/",
	"github.com/zalando/go-keyring",
	"github.com/99designs/keyring",
	"github.com/docker/docker-credential-helpers",
	"golang.org/x/crypto/ssh",
	"github.com/google/go-github/",
	"github.com/anthropics/anthropic-sdk-go/bedrock",
	"github.com/anthropics/anthropic-sdk-go/vertex",
	"github.com/anthropics/anthropic-sdk-go/aws",
	"github.com/anthropics/anthropic-sdk-go/googlecloud",
	"github.com/openai/openai-go/v3/azure",
}

// Known and accepted: the official model SDKs link their own auth plumbing
// (github.com/anthropics/anthropic-sdk-go/internal/auth for API-key/profile
// resolution), and mcp-go's client transport carries an OAuth handler
// (github.com/mark3labs/mcp-go/client/transport). The agent never calls
// them: the model services are built without environment defaults (see
// model's hostile-environment tests) and the MCP transport is built
// without OAuth (a bearer token on a plain HTTP client).

// acceptedImporters names forbidden packages that are linked for their
// types only, and the one importer each may have. database/sql/driver
// declares the Valuer and Scanner interfaces (it opens nothing);
// github.com/google/uuid implements them, and mcp-go (the MCP client)
// links uuid. Any other importer still breaks the rule.
var acceptedImporters = map[string]string{
	"database/sql/driver": "github.com/google/uuid",
}

// accepted reports whether every importer of pkg is the accepted one.
func accepted(pkg string, importers []string) bool {
	want, ok := acceptedImporters[pkg]
	if !ok || len(importers) == 0 {
		return false
	}
	for _, imp := range importers {
		if imp != want {
			return false
		}
	}
	return true
}

// forbidden returns the rule an import path breaks, or "".
func forbidden(path string) string {
	for _, p := range forbiddenImports {
		if path == strings.TrimSuffix(p, "/") || strings.HasPrefix(path, p) && (strings.HasSuffix(p, "/") || strings.HasPrefix(path[len(p):], "/") || len(path) == len(p)) {
			return p
		}
	}
	return ""
}

func TestForbiddenMatcher(t *testing.T) {
	tests := []struct {
		path string
		want string
	}{
		{path: "github.com/jackc/pgx/v5", want: "github.com/jackc/"},
		{path: "database/sql", want: "database/sql"},
		{path: "database/sql/driver", want: "database/sql"},
		{path: "database/sqlx", want: ""},
		{path: "ironcurtain.dev/gateway/internal/store", want: "ironcurtain.dev/gateway"},
		{path: "ironcurtain.dev/gatewayish", want: ""},
		{path: "github.com/aws/aws-sdk-go-v2/config", want: "github.com/aws/"},
		{path: "golang.org/x/crypto/ssh/agent", want: "golang.org/x/crypto/ssh"},
		{path: "golang.org/x/oauth2", want: ""},
		{path: "github.com/dop251/goja", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			if got := forbidden(tc.path); got != tc.want {
				t.Errorf("forbidden(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

// TestNoDatabaseSecretOrCredentialImports walks `go list -deps` of every
// non-test package in the module and fails on any forbidden import,
// naming the package that pulls it in.
func TestNoDatabaseSecretOrCredentialImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	importers := map[string][]string{}
	var all []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		all = append(all, fields[0])
		for _, imp := range fields[1:] {
			importers[imp] = append(importers[imp], fields[0])
		}
	}
	if len(all) < 50 {
		t.Fatalf("go list returned only %d packages; the walk is broken", len(all))
	}
	sort.Strings(all)
	for _, pkg := range all {
		if rule := forbidden(pkg); rule != "" && !accepted(pkg, importers[pkg]) {
			t.Errorf("the agent links %s (rule %q), imported by %v", pkg, rule, importers[pkg])
		}
	}
}

// productMCPSDK is the one MCP SDK the agent's programs use; the official
// go-sdk is a test dependency only (an independent server in interop tests).
const (
	productMCPSDK = "github.com/mark3labs/mcp-go/"
	officialSDK   = "github.com/modelcontextprotocol/go-sdk"
)

// TestOneMCPSDKInBinaries walks `go list -deps ./cmd/...` (the agent's
// programs, tests excluded) and fails when the official go-sdk is linked,
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
			t.Errorf("the agent's programs link %s; product code uses %s only", pkg, productMCPSDK)
		}
		if strings.HasPrefix(pkg, productMCPSDK) {
			mcpGo = true
		}
	}
	if !mcpGo {
		t.Errorf("the agent's programs do not link %s; is ./cmd/... still the agent's programs?", productMCPSDK)
	}
}

func TestAcceptedImporters(t *testing.T) {
	tests := []struct {
		name      string
		pkg       string
		importers []string
		want      bool
	}{
		{name: "uuid's driver interfaces", pkg: "database/sql/driver", importers: []string{"github.com/google/uuid"}, want: true},
		{name: "another importer", pkg: "database/sql/driver", importers: []string{"github.com/google/uuid", "ironcurtain.dev/agent/x"}, want: false},
		{name: "database/sql itself", pkg: "database/sql", importers: []string{"github.com/google/uuid"}, want: false},
		{name: "no importer", pkg: "database/sql/driver", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := accepted(tc.pkg, tc.importers); got != tc.want {
				t.Errorf("accepted(%q, %v) = %v, want %v", tc.pkg, tc.importers, got, tc.want)
			}
		})
	}
}
