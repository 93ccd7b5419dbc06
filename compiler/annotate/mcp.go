package annotate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"regexp"
	"sort"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"ironcurtain.dev/compiler/gatewayconfig"
)

var envRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// ListTimeout bounds connecting to a server and listing its tools.
const ListTimeout = 60 * time.Second

// passEnv are the variables of the compiler's environment a server
// inherits. Nothing else is passed: the compiler's environment holds model
// API keys, and an external server is third-party code.
var passEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER"}

// ListTools starts srv with the mcp-go client over stdio and
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
	return listTools(ctx, srv, cmd)
}

// maxPages bounds the tools/list pages read from one server.
const maxPages = 1000

// listTools connects to the server cmd runs and lists its tools.
func listTools(ctx context.Context, srv gatewayconfig.Server, cmd *exec.Cmd) ([]ToolSchema, error) {
	stdio := transport.NewStdioWithOptions(srv.Command, nil, srv.Args,
		transport.WithCommandFunc(func(context.Context, string, []string, []string) (*exec.Cmd, error) { return cmd, nil }),
		transport.WithCommandLogger(slog.New(slog.DiscardHandler)))
	c := client.NewClient(rawToolsTransport{stdio})
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("connecting to %s (%s): %w", srv.Name, srv.Command, err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "ironcurtain-compile", Version: "1"},
	}}); err != nil {
		return nil, fmt.Errorf("connecting to %s (%s): %w", srv.Name, srv.Command, err)
	}
	var out []ToolSchema
	req := mcp.ListToolsRequest{}
	for page := 0; ; page++ {
		if page > maxPages {
			return nil, fmt.Errorf("listing tools of %s: more than %d pages", srv.Name, maxPages)
		}
		var raw []json.RawMessage
		res, err := c.ListToolsByPage(withRawPages(ctx, &raw), req)
		if err != nil {
			return nil, fmt.Errorf("listing tools of %s: %w", srv.Name, err)
		}
		schemas, err := rawSchemas(raw)
		if err != nil {
			return nil, fmt.Errorf("listing tools of %s: %w", srv.Name, err)
		}
		for _, t := range res.Tools {
			schema, err := json.Marshal(schemas[t.Name])
			if err != nil {
				return nil, fmt.Errorf("listing tools of %s: tool %s: encoding input schema: %w", srv.Name, t.Name, err)
			}
			out = append(out, ToolSchema{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
		if res.NextCursor == "" {
			break
		}
		req.Params.Cursor = res.NextCursor
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// rawToolsTransport keeps the result of every tools/list request made with
// a context from withRawPages. mcp-go decodes a tool's input schema into a
// struct that keeps only some JSON Schema keywords; annotation reads the
// whole schema the server sent.
type rawToolsTransport struct {
	*transport.Stdio
}

type rawPagesKey struct{}

func withRawPages(ctx context.Context, pages *[]json.RawMessage) context.Context {
	return context.WithValue(ctx, rawPagesKey{}, pages)
}

// SendRequest implements transport.Interface.
func (t rawToolsTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.Stdio.SendRequest(ctx, req)
	if err == nil && resp != nil && resp.Error == nil && req.Method == string(mcp.MethodToolsList) {
		if pages, ok := ctx.Value(rawPagesKey{}).(*[]json.RawMessage); ok {
			*pages = append(*pages, resp.Result)
		}
	}
	return resp, err
}

// rawSchemas returns the input schemas of the tools in the tools/list
// results pages, by tool name, decoded as sent.
func rawSchemas(pages []json.RawMessage) (map[string]any, error) {
	out := map[string]any{}
	for _, page := range pages {
		var res struct {
			Tools []struct {
				Name        string `json:"name"`
				InputSchema any    `json:"inputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(page, &res); err != nil {
			return nil, fmt.Errorf("decoding a tools/list result: %w", err)
		}
		for _, t := range res.Tools {
			out[t.Name] = t.InputSchema
		}
	}
	return out, nil
}
