// Package base holds the shipped base policy: compiled-policy.json (the
// rules of compiler/constitution/base.md), tool-annotations.json (generated
// from the built-in servers' declared annotations by `ironcurtain tools
// annotations`) and dynamic-lists.json. FS embeds them, so the gateway can
// start with the base policy and no policy directory.
//
// The compiled rules were written by hand from the constitution while the
// LLM compiler was being built; see README.md. Tests load them into the real
// engine and check a table of scenarios, and check that the committed
// annotations equal what the built-in servers declare.
package base

import "embed"

// FS holds the three artifacts at its root.
//
//go:embed compiled-policy.json tool-annotations.json dynamic-lists.json
var FS embed.FS
