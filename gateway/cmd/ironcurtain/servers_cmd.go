package main

import (
	"context"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/catalog"
)

func init() {
	commands["servers"] = command{summary: "list the catalog of well-known MCP servers, or print the config to add one", run: runServers}
}

const serversUsage = `usage: ironcurtain servers list
       ironcurtain servers add <name>[@<version>]

list prints the servers of the catalog shipped with the gateway (reviewed
tool annotations and pins per version). add prints the gateway.yaml section
that runs one: the catalog: line makes the gateway use the reviewed
annotations, with no compile step. Nothing is written or started.
`

func runServers(_ context.Context, e env) int {
	if len(e.args) == 0 || e.args[0] == "-h" || e.args[0] == "--help" || e.args[0] == "help" {
		fmt.Fprint(e.stderr, serversUsage)
		if len(e.args) == 0 {
			return 2
		}
		return 0
	}
	c, err := catalog.Shipped()
	if err != nil {
		fmt.Fprintf(e.stderr, "ironcurtain servers: %v\n", err)
		return 1
	}
	switch {
	case e.args[0] == "list" && len(e.args) == 1:
		for _, name := range c.Names() {
			s, v, _ := c.Lookup(name)
			fmt.Fprintf(e.stdout, "%-16s %-22s %s\n", name, v.Version, s.Summary)
		}
		return 0
	case e.args[0] == "add" && len(e.args) == 2:
		s, v, err := c.Lookup(e.args[1])
		if err != nil {
			fmt.Fprintf(e.stderr, "ironcurtain servers add: %v\n", err)
			return 1
		}
		fmt.Fprint(e.stdout, catalog.Snippet(s, v))
		if v.Notes != "" {
			fmt.Fprintf(e.stderr, "# %s\n", strings.ReplaceAll(v.Notes, "\n", "\n# "))
		}
		return 0
	}
	fmt.Fprint(e.stderr, serversUsage)
	return 2
}
