package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	gwconfig "ironcurtain.dev/gateway/config"
)

// TestGatewaySettingsMatchServe loads the shipped gateway.yaml files as
// `ironcurtain serve` does (config.Load, then PolicySettings) and as
// `ironcurtain-compile --gateway-config` does, and requires the same policy
// settings: a rule set the compiler verified must behave the same in the
// gateway. The whole struct is compared, so a field added to the settings
// cannot be left out of either side.
func TestGatewaySettingsMatchServe(t *testing.T) {
	const home = "/home/ironcurtain"
	t.Setenv("HOME", home) // the gateway expands ~ from $HOME
	for _, file := range []string{"gateway.yaml", "gateway.servers.yaml", "cloudrun/gateway.yaml", "kubernetes/base/gateway.yaml"} {
		t.Run(file, func(t *testing.T) {
			path, err := filepath.Abs(filepath.Join("..", "..", "..", "compose", file))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatal(err)
			}
			cfg, err := gwconfig.Load(path)
			if err != nil {
				t.Fatalf("as serve loads it: %v", err)
			}
			serve := cfg.PolicySettings()
			// serve leaves Home empty, which the engine reads as $HOME; the
			// compiler's --home stands for that $HOME.
			serve.Home = home

			sf := settingsFlags{gatewayConfig: path, home: home}
			compile, _, err := sf.settings()
			if err != nil {
				t.Fatalf("as ironcurtain-compile loads it: %v", err)
			}
			if !reflect.DeepEqual(compile, serve) {
				t.Errorf("policy settings differ\ncompile: %+v\nserve:   %+v", compile, serve)
			}
			if len(serve.ConfinedServers) == 0 || serve.Sandbox == "" {
				t.Errorf("settings look empty: %+v", serve)
			}
		})
	}
}
