// Package builtin knows the gateway's built-in tool servers (filesystem,
// git, github, fetch) well enough to list their tools without running them,
// and generates tool-annotations.json from the annotations those servers
// declare in code. `ironcurtain tools annotations` writes the file; a test
// keeps the shipped copy (gateway/policies/base) equal to what it generates.
package builtin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/fetch"
	"ironcurtain.dev/gateway/internal/servers/filesystem"
	"ironcurtain.dev/gateway/internal/servers/git"
	"ironcurtain.dev/gateway/internal/servers/github"
	"ironcurtain.dev/gateway/policy"
)

// Names are the built-in servers, in the order they are listed.
var Names = []string{filesystem.ServerName, git.ServerName, github.ServerName, fetch.ServerName}

// Tools returns the declared tools of every built-in server, keyed by server
// name. The filesystem and git servers are instantiated on throwaway
// directories (their declarations do not depend on configuration).
func Tools() (map[string][]servers.Tool, error) {
	tmp, err := os.MkdirTemp("", "ironcurtain-builtin-")
	if err != nil {
		return nil, fmt.Errorf("listing built-in tools: %w", err)
	}
	defer os.RemoveAll(tmp)
	sandbox := filepath.Join(tmp, "sandbox")
	mirror := filepath.Join(tmp, "mirror")
	if err := os.Mkdir(sandbox, 0o700); err != nil {
		return nil, fmt.Errorf("listing built-in tools: %w", err)
	}
	fs, err := filesystem.New(filesystem.Config{Root: sandbox})
	if err != nil {
		return nil, fmt.Errorf("listing built-in tools: filesystem: %w", err)
	}
	g, err := git.New(git.Config{Sandbox: sandbox, MirrorDir: mirror})
	if err != nil {
		return nil, fmt.Errorf("listing built-in tools: git: %w", err)
	}
	return map[string][]servers.Tool{
		filesystem.ServerName: fs.Tools(),
		git.ServerName:        g.Tools(),
		github.ServerName:     github.Tools(),
		fetch.ServerName:      fetch.Tools(),
	}, nil
}

// Annotations returns the declared annotations of every built-in tool.
// Each server's inputHash is the SHA-256 of its annotations, so a change to
// a declaration shows in the file.
func Annotations() (*policy.Annotations, error) {
	tools, err := Tools()
	if err != nil {
		return nil, err
	}
	out := &policy.Annotations{Servers: map[string]*policy.ServerAnnotations{}}
	for _, name := range Names {
		list := tools[name]
		sa := &policy.ServerAnnotations{}
		for _, t := range list {
			a := t.Annotation
			if a.Tool != t.Name || a.Server != name {
				return nil, fmt.Errorf("annotating built-in tools: %s tool %q declares annotation %s/%s", name, t.Name, a.Server, a.Tool)
			}
			if a.InputSchema == nil {
				a.InputSchema = t.InputSchema
			}
			sa.Tools = append(sa.Tools, a)
		}
		sort.SliceStable(sa.Tools, func(i, j int) bool { return sa.Tools[i].Tool < sa.Tools[j].Tool })
		b, err := json.Marshal(sa.Tools)
		if err != nil {
			return nil, fmt.Errorf("annotating built-in tools: encoding %s: %w", name, err)
		}
		sum := sha256.Sum256(b)
		sa.InputHash = hex.EncodeToString(sum[:])
		out.Servers[name] = sa
	}
	return out, nil
}

// Marshal renders annotations as tool-annotations.json: indented, keys in a
// stable order, ending with a newline. It has no timestamp, so the same
// declarations always give the same bytes.
func Marshal(a *policy.Annotations) ([]byte, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encoding tool annotations: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return nil, fmt.Errorf("encoding tool annotations: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// File returns the bytes of tool-annotations.json for the built-in servers.
func File() ([]byte, error) {
	a, err := Annotations()
	if err != nil {
		return nil, err
	}
	return Marshal(a)
}
