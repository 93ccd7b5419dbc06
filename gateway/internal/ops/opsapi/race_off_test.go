//go:build !race

package opsapi

const raceEnabled = false
