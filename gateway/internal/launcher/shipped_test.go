package launcher

import (
	"path/filepath"
	"testing"

	"ironcurtain.dev/gateway/config"
)

// TestShippedComposeServers: compose/launcher.yaml parses, and every image
// server of compose/gateway.servers.yaml is configured there with the same
// image (the gateway refuses a mismatch at start).
func TestShippedComposeServers(t *testing.T) {
	root := filepath.Join("..", "..", "..", "compose")
	lc, err := LoadConfig(filepath.Join(root, "launcher.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gc, err := config.Load(filepath.Join(root, "gateway.servers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := gc.ImageServers()
	if len(names) == 0 {
		t.Fatal("gateway.servers.yaml has no image server")
	}
	for _, n := range names {
		if got, want := lc.Servers[n].Image, gc.Servers[n].Image; got != want {
			t.Errorf("servers.%s: launcher image %q, gateway image %q", n, got, want)
		}
	}
	if gc.Launcher.TokenFile != lc.TokenFile || gc.Launcher.Socket != lc.Socket {
		t.Errorf("socket/token differ: gateway %+v, launcher %s %s", gc.Launcher, lc.Socket, lc.TokenFile)
	}
}
