// Package tcenv is the one place the e2e test packages set testcontainers'
// environment. testcontainers reads TESTCONTAINERS_RYUK_DISABLED once, when
// its first Docker client starts, and otherwise starts its reaper (Ryuk),
// whose image cannot be pulled on a machine without a registry. So every
// e2e test package that uses testcontainers (directly or through
// internal/stack) calls NoReaper from its TestMain, before any test runs:
// plain `go test ./...` then behaves as `make test` does. The suite removes
// what it creates itself (stack.Close, stack.ReapLeftovers and the deploy
// tests' cleanups). TestEveryTestMainSetsIt holds the packages to it.
package tcenv

import "os"

// EnvRyuk is testcontainers' switch for its reaper.
const EnvRyuk = "TESTCONTAINERS_RYUK_DISABLED"

// NoReaper turns the reaper off unless the environment already chose
// (a developer with a registry may set EnvRyuk=false to keep it).
func NoReaper() {
	if _, set := os.LookupEnv(EnvRyuk); !set {
		_ = os.Setenv(EnvRyuk, "true")
	}
}
