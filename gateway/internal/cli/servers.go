package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"ironcurtain.dev/gateway/catalog"
)

const serversUsage = `usage: ironcurtain servers list
       ironcurtain servers add <name>[@<version>] [--image REF [--network NAME]]

list prints the servers of the catalog shipped with the gateway (reviewed
tool annotations and pins per version). add prints the gateway.yaml section
that runs one: the catalog: line makes the gateway use the reviewed
annotations, with no compile step. Nothing is written or started.

With --image, the server runs in image: mode, confined in its own container
by the launcher (docs/tools.md): add prints the gateway.yaml section and the
launcher.yaml entry for image REF (pin it by digest or ID) on network NAME
(default ironcurtain_agent_net, the Compose override's), and how to build
the image (make server-image for npx and uvx servers).
`

// The forms --image and --network accept: an image reference (name, tag,
// digest or ID) and a Docker network name; nothing that could end a YAML
// scalar.
var (
	imageRefRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)
	networkNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
)

// defaultServerNetwork is the server network of the Compose override
// (compose/docker-compose.servers.yml).
const defaultServerNetwork = "ironcurtain_agent_net"

func runServers(_ context.Context, e Env) int {
	if len(e.Args) == 0 || e.Args[0] == "-h" || e.Args[0] == "--help" || e.Args[0] == "help" {
		fmt.Fprint(e.Stderr, serversUsage)
		if len(e.Args) == 0 {
			return 2
		}
		return 0
	}
	var positional []string
	var image, network string
	for i := 1; i < len(e.Args); i++ {
		a := e.Args[i]
		flagName, value, hasValue := strings.Cut(a, "=")
		switch flagName {
		case "--image", "-image", "--network", "-network":
			if !hasValue {
				if i+1 >= len(e.Args) {
					fmt.Fprintf(e.Stderr, "ironcurtain servers: %s needs a value\n%s", a, serversUsage)
					return 2
				}
				i++
				value = e.Args[i]
			}
			re := networkNameRE
			if strings.HasSuffix(flagName, "image") {
				re = imageRefRE
			}
			if !re.MatchString(value) {
				fmt.Fprintf(e.Stderr, "ironcurtain servers: %s: %q is not a reference\n", flagName, value)
				return 2
			}
			if strings.HasSuffix(flagName, "image") {
				image = value
			} else {
				network = value
			}
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(e.Stderr, "ironcurtain servers: unknown flag %s\n%s", a, serversUsage)
				return 2
			}
			positional = append(positional, a)
		}
	}
	if (image != "" || network != "") && (e.Args[0] != "add" || image == "") {
		fmt.Fprintf(e.Stderr, "ironcurtain servers: --image and --network go with add (--network only with --image)\n%s", serversUsage)
		return 2
	}
	if network == "" {
		network = defaultServerNetwork
	}
	c, err := catalog.Shipped()
	if err != nil {
		fmt.Fprintf(e.Stderr, "ironcurtain servers: %v\n", err)
		return 1
	}
	switch {
	case e.Args[0] == "list" && len(positional) == 0:
		for _, name := range c.Names() {
			s, v, _ := c.Lookup(name)
			fmt.Fprintf(e.Stdout, "%-16s %-22s %s\n", name, v.Version, s.Summary)
		}
		return 0
	case e.Args[0] == "add" && len(positional) == 1:
		s, v, err := c.Lookup(positional[0])
		if err != nil {
			fmt.Fprintf(e.Stderr, "ironcurtain servers add: %v\n", err)
			return 1
		}
		if image != "" {
			fmt.Fprint(e.Stdout, catalog.ImageSnippet(s, v, image, network))
		} else {
			fmt.Fprint(e.Stdout, catalog.Snippet(s, v))
		}
		if v.Notes != "" {
			fmt.Fprintf(e.Stderr, "# %s\n", strings.ReplaceAll(v.Notes, "\n", "\n# "))
		}
		return 0
	}
	fmt.Fprint(e.Stderr, serversUsage)
	return 2
}
