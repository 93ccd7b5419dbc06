package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// originalScenario is one entry of the original's test-scenarios.json.
type originalScenario struct {
	Description string `json:"description"`
	Request     struct {
		ServerName string         `json:"serverName"`
		ToolName   string         `json:"toolName"`
		Arguments  map[string]any `json:"arguments"`
	} `json:"request"`
	Expected string `json:"expectedDecision"`
}

// knownDifferences lists the shipped scenarios where this engine is
// deliberately stricter than the original (docs/policy.md explains each).
var knownDifferences = map[string]string{
	// The shipped scenario file records what the scenario generator wanted,
	// not what the shipped compiled policy gives: on these the original
	// engine decides exactly as we do (the escalate-*-outside-permitted rules
	// escalate instead of denying; move_file inside Downloads is allowed by
	// the three Downloads rules; git_remote add and the Downloads git rules
	// are allowed; git_worktree has no rule for its write-path role).
	"Get file info for a system file -- should be denied":                                           policyDisagrees,
	"Read file from a system log -- should be denied":                                               policyDisagrees,
	"Write file to Documents folder -- should be denied (read-only access)":                         policyDisagrees,
	"Delete file from Documents folder by moving it out -- should be denied":                        policyDisagrees,
	"Move file from sandbox to an arbitrary external location -- should be denied":                  policyDisagrees,
	"Edit file in Documents folder -- should be denied (read-only policy)":                          policyDisagrees,
	"Path traversal attempt to read /etc/shadow via sandbox path -- should be denied":               policyDisagrees,
	"Create directory outside sandbox and permitted directories -- should be denied":                policyDisagrees,
	"Read multiple files including one outside permitted areas -- should be denied":                 policyDisagrees,
	"List directory with sizes for an arbitrary home folder -- should be denied":                    policyDisagrees,
	"Write file to Documents folder -- should be denied (read-only policy, write not permitted)":    policyDisagrees,
	"Delete file from Downloads folder directly (not via move) -- should be allowed":                policyDisagrees,
	"Add a remote to a sandbox repo - requires human approval":                                      policyDisagrees,
	"git_set_working_dir to Downloads folder - should be denied":                                    policyDisagrees,
	"git_worktree add in Downloads - should be allowed since agent has full write access there":     policyDisagrees,
	"git_worktree remove in Downloads - should be allowed since agent has full delete access there": policyDisagrees,
	// Deliberate differences (docs/policy.md).
	"Push to GitHub remote - requires human approval":                      "stricter: a push needs a real repository to resolve (none exists here) and main is protected",
	"Force push to remote with SSH URL - requires human approval":          "stricter: force push is denied structurally",
	"git_push with delete flag to remote - requires human approval":        "stricter: remote branch deletion is denied structurally",
	"Merge a pull request — write operation requiring human approval":      "stricter: PR merge tools are denied structurally",
	"Fetch content from an internal/private IP address — should be denied": "stricter: a URL naming a non-public address is denied structurally (structural-special-host)",
}

const policyDisagrees = "the scenario's expectation disagrees with the shipped compiled policy; the original engine decides as we do"

// originalDir holds the original's shipped artifacts and scenarios.
var originalDir = filepath.Join("testdata", "original", "generated")

// originalSettings are the settings the original's scenarios were recorded
// with. safe is Settings.SandboxSafeRoles.
func originalSettings(safe []Role) Settings {
	return Settings{
		Home:           "/home/provos",
		Sandbox:        "/home/provos/.ironcurtain/sandbox",
		ProtectedPaths: []string{"/home/provos/.ironcurtain/constitution.md", "/home/provos/.ironcurtain/generated", "/home/provos/.ironcurtain/config.json"},
		DomainAllowlists: map[string][]string{
			"git":              {"github.com", "*.github.com", "gitlab.com", "*.gitlab.com"},
			"google-workspace": {"googleapis.com", "*.googleapis.com", "accounts.google.com", "oauth2.googleapis.com", "registry.npmjs.org", "*.npmjs.org"},
		},
		SandboxSafeRoles: safe,
	}
}

func loadOriginalScenarios(t *testing.T) []originalScenario {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(originalDir, "test-scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Scenarios []originalScenario `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	return file.Scenarios
}

// TestOriginalScenarios replays the original's shipped scenarios
// (testdata/original, HOME=/home/provos as recorded) against the shipped
// artifacts, with the original's sandbox-safe roles configured explicitly,
// and reports every difference that is not a known, documented strictness.
func TestOriginalScenarios(t *testing.T) {
	e, err := LoadDir(originalDir, originalSettings(OriginalSandboxSafeRoles()))
	if err != nil {
		t.Fatal(err)
	}
	scenarios := loadOriginalScenarios(t)
	agree, evaluated, known := 0, 0, 0
	for _, s := range scenarios {
		if s.Request.ServerName == "google-workspace" {
			continue // the shipped compiled policy has no google-workspace rules
		}
		evaluated++
		ev := e.Evaluate(context.Background(), Request{Server: s.Request.ServerName, Tool: s.Request.ToolName, Args: s.Request.Arguments})
		got := ev.Decision.Status.String()
		ok := got == s.Expected || (s.Expected == "not-allow" && got != "allow")
		if ok {
			agree++
			continue
		}
		if why, ok := knownDifferences[s.Description]; ok {
			known++
			t.Logf("known difference %q: %s", s.Description, why)
			continue
		}
		in, _ := json.Marshal(s.Request)
		t.Errorf("%s: got %s (%s: %s), want %s\n  %s", s.Description, got, ev.Decision.Rule, ev.Decision.Reason, s.Expected, in)
	}
	t.Logf("%d of %d evaluated scenarios agree, %d are known differences; %d google-workspace scenarios skipped",
		agree, evaluated, known, len(scenarios)-evaluated)
}

// TestOriginalScenariosDefaultSandboxSafe replays the same scenarios with
// the default sandbox-safe roles (read-path, write-path) and compares each
// decision with the original's set: the default is never more permissive,
// and it differs only where a call deletes or rewrites history inside the
// sandbox (a delete-path, write-history or delete-history value in the
// sandbox, which now reaches the compiled rules).
func TestOriginalScenariosDefaultSandboxSafe(t *testing.T) {
	orig, err := LoadDir(originalDir, originalSettings(OriginalSandboxSafeRoles()))
	if err != nil {
		t.Fatal(err)
	}
	def, err := LoadDir(originalDir, originalSettings(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := def.SandboxSafeRoles(); !reflect.DeepEqual(got, DefaultSandboxSafeRoles()) {
		t.Fatalf("default sandbox-safe roles = %v", got)
	}
	notSafe := setOf([]Role{RoleDeletePath, RoleWriteHistory, RoleDeleteHistory})
	changed := 0
	for _, s := range loadOriginalScenarios(t) {
		req := Request{Server: s.Request.ServerName, Tool: s.Request.ToolName, Args: s.Request.Arguments}
		o := orig.Evaluate(context.Background(), req)
		d := def.Evaluate(context.Background(), req)
		if o.Decision.Status == d.Decision.Status {
			continue
		}
		changed++
		if d.Decision.Status.Severity() < o.Decision.Status.Severity() {
			t.Errorf("%s: the default allows more: %s (%s), original roles %s (%s)", s.Description,
				d.Decision.Status, d.Decision.Rule, o.Decision.Status, o.Decision.Rule)
			continue
		}
		// The difference must come from a non-safe path role in the sandbox.
		tl := def.tools[req.Server+"__"+req.Tool]
		rr := tl.resolve(req.Args)
		explained := false
		for i, a := range tl.ann.Args {
			if rr.perArg[i]&notSafe == 0 {
				continue
			}
			var vals []string
			switch v := d.Transport[a.Name].(type) {
			case string:
				vals = append(vals, v)
			case []any:
				for _, e := range v {
					if s, ok := e.(string); ok {
						vals = append(vals, s)
					}
				}
			}
			for _, v := range vals {
				if within(v, def.Sandbox()) {
					explained = true
				}
			}
		}
		if !explained {
			t.Errorf("%s: %s (%s) with the default roles, %s (%s) with the original's, but no delete or history value lies in the sandbox",
				s.Description, d.Decision.Status, d.Decision.Rule, o.Decision.Status, o.Decision.Rule)
		}
		t.Logf("changed by the default: %q: %s -> %s (%s)", s.Description, o.Decision.Status, d.Decision.Status, d.Decision.Rule)
	}
	if changed == 0 {
		t.Fatal("no scenario changed: deletes and history rewrites in the sandbox still skip the compiled rules")
	}
	t.Logf("%d scenarios decide differently with the default sandbox-safe roles", changed)
}
