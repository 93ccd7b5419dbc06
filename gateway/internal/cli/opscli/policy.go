package opscli

import (
	"context"
	"fmt"
)

const policyReloadUsage = `usage: ironcurtain policy reload [--ops-url URL] [--token-file FILE] [--json]
  Asks the running gateway to load, validate and swap its policy (as SIGHUP does).
  A policy that does not load is refused and the old one stays in force (exit 1).
  The ops API URL comes from --ops-url or IRONCURTAIN_OPS_URL (default http://127.0.0.1:8081);
  the operator token from IRONCURTAIN_OPERATOR_TOKEN or --token-file (never a flag value).`

// PolicyReload runs `ironcurtain policy reload`.
func PolicyReload(ctx context.Context, args []string, e Env) int {
	return finish(e, "policy reload", policyReload(ctx, args, e))
}

func policyReload(ctx context.Context, args []string, e Env) error {
	fs := newFlagSet("policy reload", e)
	opsURL := fs.String("ops-url", "", "ops API URL (default $"+EnvOpsURL+" or "+DefaultOpsURL+")")
	tokenFile := fs.String("token-file", "", "file holding the operator token (default $"+EnvOperatorToken+")")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprintln(e.Stderr, policyReloadUsage); fs.PrintDefaults() }
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErr("reload takes no arguments\n%s", policyReloadUsage)
	}
	client, err := opsClient(e, *opsURL, *tokenFile)
	if err != nil {
		return err
	}
	res, err := client.ReloadPolicy(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.Stdout, res)
	}
	fmt.Fprintf(e.Stdout, "policy %s: version %s (was %s), %d rules, %d tools, shadow %v, loaded in %s\n",
		res.Result, res.Version, res.Previous, res.Rules, res.Tools, res.Shadow, res.Duration)
	for _, w := range res.Warnings {
		fmt.Fprintf(e.Stdout, "warning: %s\n", w)
	}
	return nil
}
