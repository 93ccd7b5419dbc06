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

// Known and accepted: the official SDKs link their own auth plumbing
// (github.com/anthropics/anthropic-sdk-go/internal/auth for API-key/profile
// resolution, github.com/modelcontextprotocol/go-sdk/auth and
// golang.org/x/oauth2 for MCP OAuth). The agent never calls it: the model
// services are built without environment defaults (see model's
// hostile-environment tests) and the MCP transport has no OAuth handler.

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
		if rule := forbidden(pkg); rule != "" {
			t.Errorf("the agent links %s (rule %q), imported by %v", pkg, rule, importers[pkg])
		}
	}
}
