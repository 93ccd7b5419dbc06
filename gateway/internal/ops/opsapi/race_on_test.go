//go:build race

package opsapi

// raceEnabled: the race detector keeps shadow memory for what the test
// touches, so the process's RSS grows by several times the heap's growth.
const raceEnabled = true
