package tsdecl

import (
	"strings"
	"unicode/utf8"
)

// reservedWords cannot be used as function or namespace names (ECMAScript
// reserved and strict-mode words, plus names TypeScript gives meaning to).
var reservedWords = map[string]bool{
	"break": true, "case": true, "catch": true, "class": true, "const": true, "continue": true,
	"debugger": true, "default": true, "delete": true, "do": true, "else": true, "enum": true,
	"export": true, "extends": true, "false": true, "finally": true, "for": true, "function": true,
	"if": true, "import": true, "in": true, "instanceof": true, "new": true, "null": true,
	"return": true, "super": true, "switch": true, "this": true, "throw": true, "true": true,
	"try": true, "typeof": true, "var": true, "void": true, "while": true, "with": true,
	"implements": true, "interface": true, "let": true, "package": true, "private": true,
	"protected": true, "public": true, "static": true, "yield": true, "await": true,
	"arguments": true, "eval": true, "async": true, "of": true,
	// TypeScript names that would make a declaration read oddly or fail.
	"declare": true, "namespace": true, "module": true, "global": true, "type": true,
	"any": true, "unknown": true, "never": true, "string": true, "number": true,
	"boolean": true, "symbol": true, "object": true, "bigint": true, "undefined": true,
	"as": true, "is": true, "keyof": true, "readonly": true, "infer": true, "require": true,
}

// globalNames are sandbox globals a namespace must not shadow.
var globalNames = map[string]bool{
	"console": true, "globalThis": true, "Object": true, "Function": true, "Array": true,
	"String": true, "Number": true, "Boolean": true, "Symbol": true, "BigInt": true,
	"Math": true, "JSON": true, "Date": true, "RegExp": true, "Error": true, "TypeError": true,
	"RangeError": true, "SyntaxError": true, "ReferenceError": true, "EvalError": true,
	"URIError": true, "AggregateError": true, "Promise": true, "Proxy": true, "Reflect": true,
	"Map": true, "Set": true, "WeakMap": true, "WeakSet": true, "WeakRef": true,
	"FinalizationRegistry": true, "ArrayBuffer": true, "DataView": true, "Int8Array": true,
	"Uint8Array": true, "Uint8ClampedArray": true, "Int16Array": true, "Uint16Array": true,
	"Int32Array": true, "Uint32Array": true, "Float32Array": true, "Float64Array": true,
	"BigInt64Array": true, "BigUint64Array": true, "NaN": true, "Infinity": true,
	"isNaN": true, "isFinite": true, "parseInt": true, "parseFloat": true, "encodeURI": true,
	"decodeURI": true, "encodeURIComponent": true, "decodeURIComponent": true,
	"escape": true, "unescape": true, "Iterator": true,
}

// sanitize maps name to an ASCII JavaScript identifier: characters outside
// [A-Za-z0-9_$] become '_', a leading digit gets a '_' prefix, and an
// empty name becomes "_". Long names are cut at maxIdent bytes.
func sanitize(name string) string {
	const maxIdent = 64
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= maxIdent {
			break
		}
		switch {
		case r == '_' || r == '$' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		return "_"
	}
	if s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	return s
}

func functionIdent(name string) string {
	s := sanitize(name)
	if reservedWords[s] {
		s += "_"
	}
	return s
}

func namespaceIdent(name string) string {
	s := sanitize(name)
	if reservedWords[s] || globalNames[s] {
		s += "_"
	}
	return s
}

// isIdentifier reports whether s can be written as a bare property name.
func isIdentifier(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for i, r := range s {
		ok := r == '_' || r == '$' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
