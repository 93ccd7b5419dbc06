package policy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"ironcurtain.dev/gateway/internal/testenv"
)

// A decision suite is one testdata/*.yaml file: settings, a set-up of real
// files, directories, symlinks and git repositories in a fresh temporary
// tree, and cases evaluated in order (a case may change the tree first).
// Strings may use $SANDBOX, $SANDBOX2 (a sibling whose name extends the
// sandbox's), $OUTSIDE, $HOME, $ROOT and $POLICY_DIR (the loaded fixture).
type suite struct {
	Description string   `yaml:"description"`
	Fixture     string   `yaml:"fixture"`
	Settings    settings `yaml:"settings"`
	Setup       []op     `yaml:"setup"`
	Cases       []tcase  `yaml:"cases"`
}

type settings struct {
	ProtectedPaths    []string            `yaml:"protected_paths"`
	ProtectedBranches []string            `yaml:"protected_branches"`
	TrustedServers    []string            `yaml:"trusted_servers"`
	AllowedDomains    map[string][]string `yaml:"allowed_domains"`
	NoSandbox         bool                `yaml:"no_sandbox"`
	// Sandbox replaces $SANDBOX as the engine's sandbox (created if missing).
	Sandbox string `yaml:"sandbox"`
	// SandboxSafeRoles is Settings.SandboxSafeRoles: absent means the
	// default, [] means none.
	SandboxSafeRoles *[]Role `yaml:"sandbox_safe_roles"`
}

// op is one set-up step; exactly one field is set.
type op struct {
	Mkdir   string   `yaml:"mkdir"`
	Write   string   `yaml:"write"`
	File    []string `yaml:"file"`    // [path, content]
	Symlink []string `yaml:"symlink"` // [link, target]
	Link    []string `yaml:"link"`    // [new hard link, existing file]
	Remove  string   `yaml:"remove"`
	GitRepo string   `yaml:"git_repo"` // init with branch main and one commit
	Git     []string `yaml:"git"`      // [dir, args...]
}

type tcase struct {
	Name           string         `yaml:"name"`
	Setup          []op           `yaml:"setup"`
	Tool           string         `yaml:"tool"`
	Args           map[string]any `yaml:"args"`
	Want           string         `yaml:"want"`
	Rule           string         `yaml:"rule"`
	ReasonContains string         `yaml:"reason_contains"`
	EscalatedRoles []Role         `yaml:"escalated_roles"`
	Transport      map[string]any `yaml:"transport"`
	Policy         map[string]any `yaml:"policy"`
}

type tree struct{ root, sandbox, sandbox2, outside, home, policyDir string }

func (tr tree) expand(s string) string {
	r := strings.NewReplacer("$SANDBOX2", tr.sandbox2, "$SANDBOX", tr.sandbox, "$OUTSIDE", tr.outside, "$HOME", tr.home,
		"$ROOT", tr.root, "$POLICY_DIR", tr.policyDir)
	return r.Replace(s)
}

func (tr tree) expandValue(v any) any {
	switch x := v.(type) {
	case string:
		return tr.expand(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tr.expandValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = tr.expandValue(e)
		}
		return out
	case int:
		return float64(x) // JSON numbers decode as float64
	}
	return v
}

func newTree(t testing.TB) tree {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := tree{root: root, sandbox: filepath.Join(root, "sandbox"), sandbox2: filepath.Join(root, "sandbox2"),
		outside: filepath.Join(root, "outside"), home: filepath.Join(root, "home")}
	if abs, err := filepath.Abs(filepath.Join("testdata", "fixtures", "base")); err == nil {
		tr.policyDir = abs
	}
	for _, d := range []string{tr.sandbox, tr.sandbox2, tr.outside, filepath.Join(tr.home, "Downloads")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// testGit runs git for set-up, isolated from the developer's configuration.
func testGit(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
}

func (tr tree) apply(t testing.TB, ops []op) {
	t.Helper()
	for _, o := range ops {
		switch {
		case o.Mkdir != "":
			if err := os.MkdirAll(tr.expand(o.Mkdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case o.Write != "":
			p := tr.expand(o.Write)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("data\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		case len(o.File) == 2:
			p := tr.expand(o.File[0])
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tr.expand(o.File[1])), 0o644); err != nil {
				t.Fatal(err)
			}
		case len(o.Symlink) == 2:
			if err := os.Symlink(tr.expand(o.Symlink[1]), tr.expand(o.Symlink[0])); err != nil {
				t.Fatal(err)
			}
		case len(o.Link) == 2:
			if err := os.Link(tr.expand(o.Link[1]), tr.expand(o.Link[0])); err != nil {
				t.Fatal(err)
			}
		case o.Remove != "":
			if err := os.RemoveAll(tr.expand(o.Remove)); err != nil {
				t.Fatal(err)
			}
		case o.GitRepo != "":
			dir := tr.expand(o.GitRepo)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			testenv.Require(t, "git")
			testGit(t, dir, "init", "-q", "-b", "main")
			testGit(t, dir, "commit", "-q", "--allow-empty", "-m", "initial")
		case len(o.Git) >= 2:
			args := make([]string, len(o.Git)-1)
			for i, a := range o.Git[1:] {
				args[i] = tr.expand(a)
			}
			testGit(t, tr.expand(o.Git[0]), args...)
		default:
			t.Fatalf("empty or malformed set-up step %+v", o)
		}
	}
}

func (tr tree) engine(t testing.TB, s suite) *Engine {
	t.Helper()
	return tr.engineWith(t, s, withGit(t))
}

// engineWith is engine with the given options (a resolver) instead of the
// real resolver.
func (tr tree) engineWith(t testing.TB, s suite, opts ...Option) *Engine {
	t.Helper()
	fixture := s.Fixture
	if fixture == "" {
		fixture = "base"
	}
	set := Settings{Home: tr.home, ProtectedBranches: s.Settings.ProtectedBranches, TrustedServers: s.Settings.TrustedServers}
	if !s.Settings.NoSandbox {
		set.Sandbox = tr.sandbox
		if s.Settings.Sandbox != "" {
			set.Sandbox = tr.expand(s.Settings.Sandbox)
			if err := os.MkdirAll(set.Sandbox, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.Settings.SandboxSafeRoles != nil {
		set.SandboxSafeRoles = append([]Role{}, *s.Settings.SandboxSafeRoles...)
	}
	for _, p := range s.Settings.ProtectedPaths {
		set.ProtectedPaths = append(set.ProtectedPaths, tr.expand(p))
	}
	set.DomainAllowlists = s.Settings.AllowedDomains
	e, err := LoadDir(filepath.Join("testdata", "fixtures", fixture), set, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func loadSuites(t testing.TB) map[string]suite {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]suite{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s suite
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = s
	}
	return out
}

func TestDecisions(t *testing.T) {
	suites := loadSuites(t)
	total := 0
	for _, name := range sortedKeys(suites) {
		s := suites[name]
		total += len(s.Cases)
		t.Run(name, func(t *testing.T) {
			tr := newTree(t)
			tr.apply(t, s.Setup)
			e := tr.engine(t, s)
			seen := map[string]bool{}
			for _, c := range s.Cases {
				if seen[c.Name] {
					t.Fatalf("duplicate case name %q", c.Name)
				}
				seen[c.Name] = true
				t.Run(c.Name, func(t *testing.T) {
					tr.apply(t, c.Setup)
					server, toolName, ok := strings.Cut(c.Tool, "__")
					if !ok {
						t.Fatalf("tool %q is not server__tool", c.Tool)
					}
					args, _ := tr.expandValue(c.Args).(map[string]any)
					if c.Args == nil {
						args = nil
					}
					ev := e.Evaluate(context.Background(), Request{Server: server, Tool: toolName, Args: args})
					d := ev.Decision
					if d.Status.String() != c.Want {
						t.Fatalf("decision = %s (%s: %s; %s), want %s", d.Status, d.Rule, d.Reason, d.Detail, c.Want)
					}
					if c.Rule != "" && d.Rule != c.Rule {
						t.Fatalf("rule = %q (%s), want %q", d.Rule, d.Reason, c.Rule)
					}
					if c.ReasonContains != "" && !strings.Contains(d.Reason, tr.expand(c.ReasonContains)) {
						t.Fatalf("reason %q does not contain %q", d.Reason, c.ReasonContains)
					}
					if c.EscalatedRoles != nil && !reflect.DeepEqual(d.EscalatedRoles, c.EscalatedRoles) {
						t.Fatalf("escalated roles = %v, want %v", d.EscalatedRoles, c.EscalatedRoles)
					}
					checkArgs(t, "transport", ev.Transport, tr.expandValue(c.Transport))
					checkArgs(t, "policy", ev.Policy, tr.expandValue(c.Policy))
					if d.Status != Deny && strings.Contains(d.Reason, tr.outside) {
						t.Fatalf("reason leaks a host path: %q", d.Reason)
					}
				})
			}
		})
	}
	if total < 150 {
		t.Errorf("the decision suite has %d cases; at least 150 are required", total)
	}
	t.Logf("%d decision cases in %d suites", total, len(suites))
}

func checkArgs(t *testing.T, what string, got map[string]any, want any) {
	t.Helper()
	w, _ := want.(map[string]any)
	for k, v := range w {
		if !reflect.DeepEqual(got[k], v) {
			t.Fatalf("%s[%q] = %#v, want %#v", what, k, got[k], v)
		}
	}
}

// TestDecisionSuiteCoversEveryRole keeps the suite honest: every role of
// the registry appears in some case's tool annotation.
func TestDecisionSuiteCoversEveryRole(t *testing.T) {
	suites := loadSuites(t)
	e := newTree(t).engine(t, suite{})
	used := map[Role]bool{}
	for _, s := range suites {
		for _, c := range s.Cases {
			server, toolName, _ := strings.Cut(c.Tool, "__")
			ann, ok := e.Annotation(server, toolName)
			if !ok {
				continue
			}
			for _, a := range ann.Args {
				if _, present := c.Args[a.Name]; !present {
					continue
				}
				for _, r := range a.Spec.Default {
					used[r] = true
				}
				for _, w := range a.Spec.When {
					for _, r := range w.Roles {
						used[r] = true
					}
				}
			}
		}
	}
	var missing []string
	for _, d := range Roles() {
		if !used[d.Role] {
			missing = append(missing, string(d.Role))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("roles never exercised by a decision case: %s", strings.Join(missing, ", "))
	}
}

var _ = fmt.Sprintf
