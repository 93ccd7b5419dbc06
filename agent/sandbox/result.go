package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// ErrorKind classifies why a run did not complete.
type ErrorKind int

// Error kinds.
const (
	KindSyntax      ErrorKind = iota + 1 // the code does not parse (line/column set)
	KindRuntime                          // an uncaught exception (line/column when known)
	KindTimeout                          // script time exhausted: a runaway loop
	KindToolLimit                        // too many tool calls
	KindOutputLimit                      // too much output
	KindMemory                           // heap grew past the limit
	KindUnsettled                        // awaited a promise that never settled
	KindCanceled                         // the context ended (budget, signal)
	KindStuck                            // did not stop after an interrupt; sandbox unusable
	KindInternal                         // a fault of the sandbox itself
)

var kindNames = map[ErrorKind]string{
	KindSyntax: "syntax", KindRuntime: "runtime", KindTimeout: "timeout",
	KindToolLimit: "tool-limit", KindOutputLimit: "output-limit", KindMemory: "memory",
	KindUnsettled: "unsettled", KindCanceled: "canceled", KindStuck: "stuck", KindInternal: "internal",
}

func (k ErrorKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error says why a run failed. Line and Column (1-based) point into the
// model's code when known.
type Error struct {
	Kind    ErrorKind
	Message string
	Line    int
	Column  int
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d, column %d)", e.Message, e.Line, e.Column)
	}
	return e.Message
}

// Result is what one Run produced.
type Result struct {
	Output     string        // console output
	Value      string        // the returned value (JSON, or text for strings); "" if none
	Err        *Error        // nil when the code completed
	ToolCalls  int           // tool calls made (including refused ones)
	ScriptTime time.Duration // time the script ran, excluding tool calls
	ToolTime   time.Duration // time spent in tool calls
}

// Failed reports whether the run ended with an error.
func (r Result) Failed() bool { return r.Err != nil }

// Report renders the result as the text the model receives.
func (r Result) Report() string {
	var b strings.Builder
	if r.Err != nil {
		b.WriteString("status: error (" + r.Err.Kind.String() + ")\n")
	} else {
		b.WriteString("status: ok\n")
	}
	fmt.Fprintf(&b, "tool calls: %d\n", r.ToolCalls)
	if r.Output != "" {
		b.WriteString("output:\n")
		b.WriteString(r.Output)
		if !strings.HasSuffix(r.Output, "\n") {
			b.WriteByte('\n')
		}
	}
	if r.Value != "" {
		b.WriteString("returned:\n")
		b.WriteString(r.Value)
		b.WriteByte('\n')
	}
	if r.Err != nil {
		b.WriteString("error: " + r.Err.Error() + "\n")
		if r.ToolCalls > 0 && r.Err.Kind != KindSyntax {
			b.WriteString("note: tool calls made before the error have taken effect.\n")
		}
	}
	return b.String()
}
