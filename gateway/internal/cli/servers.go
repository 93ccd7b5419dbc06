package cli

import (
	"context"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/catalog"
)

const serversUsage = `usage: ironcurtain servers list
       ironcurtain servers add <name>[@<version>]

list prints the servers of the catalog shipped with the gateway (reviewed
tool annotations and pins per version). add prints the gateway.yaml section
that runs one: the catalog: line makes the gateway use the reviewed
annotations, with no compile step. Nothing is written or started.
`

func runServers(_ context.Context, e Env) int {
	if len(e.Args) == 0 || e.Args[0] == "-h" || e.Args[0] == "--help" || e.Args[0] == "help" {
		fmt.Fprint(e.Stderr, serversUsage)
		if len(e.Args) == 0 {
			return 2
		}
		return 0
	}
	for _, a := range e.Args[1:] {
		if strings.HasPrefix(a, "-") {
			fmt.Fprintf(e.Stderr, "ironcurtain servers: unknown flag %s\n%s", a, serversUsage)
			return 2
		}
	}
	c, err := catalog.Shipped()
	if err != nil {
		fmt.Fprintf(e.Stderr, "ironcurtain servers: %v\n", err)
		return 1
	}
	switch {
	case e.Args[0] == "list" && len(e.Args) == 1:
		for _, name := range c.Names() {
			s, v, _ := c.Lookup(name)
			fmt.Fprintf(e.Stdout, "%-16s %-22s %s\n", name, v.Version, s.Summary)
		}
		return 0
	case e.Args[0] == "add" && len(e.Args) == 2:
		s, v, err := c.Lookup(e.Args[1])
		if err != nil {
			fmt.Fprintf(e.Stderr, "ironcurtain servers add: %v\n", err)
			return 1
		}
		fmt.Fprint(e.Stdout, catalog.Snippet(s, v))
		if v.Notes != "" {
			fmt.Fprintf(e.Stderr, "# %s\n", strings.ReplaceAll(v.Notes, "\n", "\n# "))
		}
		return 0
	}
	fmt.Fprint(e.Stderr, serversUsage)
	return 2
}
