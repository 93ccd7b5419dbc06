package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/gateway/policy"
)

// goldenDir is a policy directory holding the golden artifacts and the
// fixture annotations.
func goldenDir(t *testing.T) string {
	t.Helper()
	dir := fixtureDir(t)
	for _, n := range []string{artifact.CompiledPolicyFile, artifact.DynamicListsFile, artifact.ScenariosFile} {
		b, err := os.ReadFile(filepath.Join(testenv.Dir(), "golden", "want", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var settingsArgs = []string{"--sandbox", "/workspace", "--home", "/home/agent", "--allow-domain", "git=github.com", "--allow-domain", "git=*.github.com"}

func TestVerifyCommand(t *testing.T) {
	dir := goldenDir(t)
	code, out, errs := invoke(t, keyEnv(), append([]string{"verify", "--dir", dir}, settingsArgs...)...)
	if code != exitOK || !strings.Contains(out, "0 fail") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}

	// Turn the escalation of writes into ~/Downloads into an allow: the
	// generated scenario expecting escalate now fails.
	path := filepath.Join(dir, artifact.CompiledPolicyFile)
	b, _ := os.ReadFile(path)
	pol, err := policy.ParseCompiledPolicy(path, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pol.Rules {
		if pol.Rules[i].Name == "filesystem-escalate-write-downloads" {
			pol.Rules[i].Then = policy.Allow
		}
	}
	if err := artifact.Write(dir, artifact.CompiledPolicyFile, pol); err != nil {
		t.Fatal(err)
	}
	code, out, _ = invoke(t, keyEnv(), append([]string{"verify", "--dir", dir}, settingsArgs...)...)
	if code != exitFailed || !strings.Contains(out, `FAIL [generated] Write a report into ~/Downloads: expected escalate, got allow`) {
		t.Fatalf("tampered policy: exit %d\n%s", code, out)
	}
}

func TestPolicyDiffCommand(t *testing.T) {
	oldDir, newDir := goldenDir(t), goldenDir(t)
	code, out, errs := invoke(t, keyEnv(), "policy-diff", oldDir, newDir)
	if code != exitOK || !strings.Contains(out, "rules: 0 added, 0 removed, 0 changed, 0 moved") {
		t.Fatalf("identical: exit %d\n%s%s", code, out, errs)
	}

	path := filepath.Join(newDir, artifact.CompiledPolicyFile)
	b, _ := os.ReadFile(path)
	pol, err := policy.ParseCompiledPolicy(path, b)
	if err != nil {
		t.Fatal(err)
	}
	var kept []policy.CompiledRule
	for _, r := range pol.Rules {
		switch r.Name {
		case "fetch-escalate-other-sites":
			continue // removed
		case "git-escalate-push-github":
			r.Then = policy.Allow
		}
		kept = append(kept, r)
	}
	pol.Rules = kept
	if err := artifact.Write(newDir, artifact.CompiledPolicyFile, pol); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"diff", oldDir, newDir, "--scenarios", filepath.Join(oldDir, artifact.ScenariosFile)}, settingsArgs...)
	code, out, errs = invoke(t, keyEnv(), args...)
	if code != exitFailed {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"rules: 0 added, 1 removed, 1 changed, 0 moved",
		"- fetch-escalate-other-sites (#2)",
		"~ git-escalate-push-github",
		"then: escalate",
		"-> allow",
		"Fetch an unlisted site",
		"escalate (fetch-escalate-other-sites) -> deny (default-deny)",
		"Push a feature branch to GitHub",
		"escalate (git-escalate-push-github) -> allow (git-escalate-push-github)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
}

func TestResolveListsCommand(t *testing.T) {
	dir := goldenDir(t)
	// The operator added a site and removed one.
	path := filepath.Join(dir, artifact.DynamicListsFile)
	b, _ := os.ReadFile(path)
	lists, err := policy.ParseDynamicLists(path, b)
	if err != nil {
		t.Fatal(err)
	}
	l := lists.Lists["popular-news-sites"]
	l.ManualAdditions = []string{"lwn.net"}
	l.ManualRemovals = []string{"reuters.com", "*.reuters.com"}
	lists.Lists["popular-news-sites"] = l
	if err := artifact.Write(dir, artifact.DynamicListsFile, lists); err != nil {
		t.Fatal(err)
	}

	refuse := fakemodel.New(func(fakemodel.Request) fakemodel.Answer { return fakemodel.Answer{Status: 599} })
	defer refuse.Close()
	code, out, errs := invoke(t, keyEnv(), "resolve-lists", "--dir", dir, "--base-url", refuse.AnthropicURL(), "--no-cache")
	if code != exitOK || refuse.Calls() != 0 || !strings.Contains(out, "@popular-news-sites: unchanged") {
		t.Fatalf("unchanged list: exit %d, %d calls\n%s%s", code, refuse.Calls(), out, errs)
	}

	srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		if strings.Contains(r.Last(), "news websites") {
			return fakemodel.Answer{Text: `{"values": ["apnews.com", "reuters.com", "co.uk"]}`}
		}
		return fakemodel.Answer{Status: 599}
	})
	defer srv.Close()
	code, out, errs = invoke(t, keyEnv(), "resolve-lists", "--dir", dir, "--base-url", srv.AnthropicURL(), "--no-cache", "--refresh", "--retries", "0")
	if code != exitRuntime || !strings.Contains(errs, `"co.uk" is a public suffix`) {
		t.Fatalf("a public suffix must be refused: exit %d\n%s%s", code, out, errs)
	}
	srv2 := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		return fakemodel.Answer{Text: `{"values": ["apnews.com", "reuters.com"]}`}
	})
	defer srv2.Close()
	code, out, errs = invoke(t, keyEnv(), "resolve-lists", "--dir", dir, "--base-url", srv2.AnthropicURL(), "--no-cache", "--list", "popular-news-sites")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	b, _ = os.ReadFile(path)
	var got policy.DynamicLists
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	nl := got.Lists["popular-news-sites"]
	if strings.Join(nl.ManualAdditions, ",") != "lwn.net" || len(nl.ManualRemovals) != 2 {
		t.Errorf("manual edits lost: %+v", nl)
	}
	if eff := strings.Join(nl.Effective(), ","); eff != "apnews.com,*.apnews.com,lwn.net" {
		t.Errorf("effective values = %s", eff)
	}
	if code, _, errs := invoke(t, keyEnv(), "resolve-lists", "--dir", dir, "--list", "no-such-list"); code != exitUsage || !strings.Contains(errs, "no-such-list") {
		t.Errorf("unknown list: exit %d %s", code, errs)
	}
}

// TestVerifyShippedPolicy runs the invariants and the shipped scenarios
// against the base policy in gateway/policies/base, with the allowlists its
// own tests use: the policy the gateway ships must pass what the compiler
// would demand of a compiled one.
func TestVerifyShippedPolicy(t *testing.T) {
	dir := filepath.Join(testenv.Dir(), "..", "..", "gateway", "policies", "base")
	if _, err := os.Stat(filepath.Join(dir, artifact.CompiledPolicyFile)); err != nil {
		t.Fatalf("the shipped policy is missing: %v", err)
	}
	code, out, errs := invoke(t, keyEnv(), "verify", "--dir", dir,
		"--allow-domain", "fetch=docs.example.com", "--allow-domain", "git=github.com", "--allow-domain", "git=*.github.com")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}
