package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"ironcurtain.dev/gateway/internal/servers/builtin"
	"ironcurtain.dev/gateway/policy"
)

const cliUsage = `usage: ironcurtain tools <command> [flags]

commands:
  list         list the built-in tools and the roles of their arguments
  annotations  write tool-annotations.json from the built-in servers' declared annotations
  pin          review the external servers' tool definitions and pin them (docs/tools.md)
`

// runTools is `ironcurtain tools list|annotations`.
func runTools(_ context.Context, e Env) int {
	return toolsCmd(e.Args, e.Stdout, e.Stderr)
}

// toolsCmd runs `ironcurtain tools` with args and returns the exit code.
func toolsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, cliUsage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, cliUsage)
		return 0
	}
	switch args[0] {
	case "list":
		return runList(args[1:], stdout, stderr)
	case "annotations":
		return runAnnotations(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "ironcurtain tools: unknown command %q\n%s", args[0], cliUsage)
	return 2
}

func runList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tools list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON: one object per tool with name, description and args")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tools, err := builtin.Tools()
	if err != nil {
		fmt.Fprintf(stderr, "ironcurtain tools list: %v\n", err)
		return 1
	}
	type entry struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Args        map[string]any `json:"args"`
	}
	var entries []entry
	for _, server := range builtin.Names {
		for _, t := range tools[server] {
			e := entry{Name: server + "__" + t.Name, Description: t.Description, Args: map[string]any{}}
			for _, a := range t.Annotation.Args {
				e.Args[a.Name] = a.Spec
			}
			entries = append(entries, e)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(entries); err != nil {
			fmt.Fprintf(stderr, "ironcurtain tools list: %v\n", err)
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tARGUMENTS (roles)")
	for _, server := range builtin.Names {
		for _, t := range tools[server] {
			var parts []string
			for _, a := range t.Annotation.Args {
				parts = append(parts, a.Name+"="+roleText(a.Spec))
			}
			fmt.Fprintf(tw, "%s__%s\t%s\n", server, t.Name, strings.Join(parts, " "))
		}
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "ironcurtain tools list: %v\n", err)
		return 1
	}
	return 0
}

// roleText renders a spec compactly: "read-path", "read-path|write-path",
// or "{write-path,…}?" for a conditional spec (its default roles).
func roleText(s policy.ArgSpec) string {
	var rs []string
	for _, r := range s.Default {
		rs = append(rs, string(r))
	}
	t := strings.Join(rs, "|")
	if s.Conditional() {
		t = "{" + t + "}?"
	}
	return t
}

func runAnnotations(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tools annotations", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write to this file instead of standard output")
	check := fs.String("check", "", "compare this file with what would be generated; exit 1 when it differs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ironcurtain tools annotations: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	b, err := builtin.File()
	if err != nil {
		fmt.Fprintf(stderr, "ironcurtain tools annotations: %v\n", err)
		return 1
	}
	if *check != "" {
		got, err := os.ReadFile(*check)
		if err != nil {
			fmt.Fprintf(stderr, "ironcurtain tools annotations: reading %s: %v\n", *check, err)
			return 1
		}
		if !bytes.Equal(got, b) {
			fmt.Fprintf(stderr, "ironcurtain tools annotations: %s differs from the built-in servers' declarations; regenerate it with -o\n", *check)
			return 1
		}
		fmt.Fprintf(stdout, "%s is up to date\n", *check)
		return 0
	}
	if *out == "" {
		if _, err := stdout.Write(b); err != nil {
			fmt.Fprintf(stderr, "ironcurtain tools annotations: %v\n", err)
			return 1
		}
		return 0
	}
	if err := writeFile(*out, b); err != nil {
		fmt.Fprintf(stderr, "ironcurtain tools annotations: %v\n", err)
		return 1
	}
	return 0
}

// writeFile replaces path atomically (temporary file + rename).
func writeFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tool-annotations-*.json")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
