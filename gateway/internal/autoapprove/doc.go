// Package autoapprove is the auto-approver: a model, reached with the
// relay's own provider settings and key, that sees a new escalation made by
// a compiled policy rule before a human does and may approve it or leave it
// to a human. It can never deny, and it never sees what a structural check
// or a deny rule decided (escalation.Eligible).
//
// What the model sees is sanitised context only: the tool, the rule and its
// reason, the call's redacted canonical arguments and the session's recent
// decisions — no free text the agent wrote beyond its arguments. All of it
// is one JSON object inside a data block fenced by a per-request random
// delimiter, and the instructions say that data never contains instructions
// (prompt.go). The answer must be one JSON object of a fixed schema
// (verdict.go); anything else, an error, a timeout, a spent budget or the
// rate limit leaves the call to a human. Off by default.
package autoapprove
