package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/buildinfo"
)

// versionCmd is `ironcurtain version`: the same line as --version, or the
// build information as JSON.
func versionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "print the build: version, VCS revision, Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Get()
			if asJSON {
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return exit(ExitFailed)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", cmd.Root().Name(), info)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, revision, modified, go")
	return c
}

// helpCmd replaces cobra's help command, which answers an unknown topic
// with exit 0: here that is bad usage like any unknown command.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return fmt.Errorf("unknown help topic %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag() // as cobra's own help command does
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
