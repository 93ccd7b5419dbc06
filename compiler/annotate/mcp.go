package annotate

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"ironcurtain.dev/compiler/gatewayconfig"
)

var envRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// ListTimeout bounds connecting to a server and listing its tools.
const ListTimeout = 60 * time.Second

// passEnv are the variables of the compiler's environment a server
// inherits. Nothing else is passed: the compiler's environment holds model
// API keys, and an external server is third-party code.
var passEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER"}

// ListTools starts srv with the official MCP Go SDK client over stdio and
// returns its tools sorted by name. getenv supplies the passed-through
// variables; srv.Env is added on top, with ${NAME} values read through
// getenv as the gateway does.
func ListTools(ctx context.Context, srv gatewayconfig.Server, getenv func(string) string) ([]ToolSchema, error) {
	if !srv.External() {
		return nil, fmt.Errorf("listing tools of %s: the server has no command (built-in servers annotate themselves)", srv.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	cmd := exec.Command(srv.Command, srv.Args...)
	for _, k := range passEnv {
		if v := getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(srv.Env))
	for k := range srv.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := srv.Env[k]
		// Like the gateway: a value that is exactly ${NAME} is read from
		// the environment (the operator chose to pass that variable).
		if m := envRef.FindStringSubmatch(v); m != nil {
			if v = getenv(m[1]); v == "" {
				return nil, fmt.Errorf("starting %s: servers.%s.env.%s refers to $%s, which is not set", srv.Name, srv.Name, k, m[1])
			}
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "ironcurtain-compile", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s (%s): %w", srv.Name, srv.Command, err)
	}
	defer session.Close()
	var out []ToolSchema
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, fmt.Errorf("listing tools of %s: more than 1000 pages", srv.Name)
		}
		res, err := session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("listing tools of %s: %w", srv.Name, err)
		}
		for _, t := range res.Tools {
			schema, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("listing tools of %s: tool %s: encoding input schema: %w", srv.Name, t.Name, err)
			}
			out = append(out, ToolSchema{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
