// Package constitution ships the base constitution (base.md, maintained with
// the built-in servers) inside the compiler binary, so compile-policy needs
// no file to start from.
package constitution

import _ "embed"

// Base is the text of base.md.
//
//go:embed base.md
var Base string
