package opsapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"ironcurtain.dev/gateway/internal/escalation"
)

// argsField is how the arguments of an escalation encode when they are
// left out; the other fields are agent text encoded as JSON strings, so
// this byte sequence can only be the field itself.
var argsField = []byte(`,"args":null,`)

// writeEscalation answers 200 with one escalation and its canonical
// arguments whole (up to the request cap, 4 MiB): an operator approves
// exactly what will run. The arguments are written straight from the row
// instead of through an encoder, which would copy them into its own
// growing buffer: the handler holds the row's text once.
func writeEscalation(w http.ResponseWriter, e escalation.Escalation) {
	args := e.Args
	e.Args = nil
	rest, err := json.Marshal(e) // every other field: small
	i := bytes.Index(rest, argsField)
	if err != nil || i < 0 {
		e.Args = args
		writeJSON(w, http.StatusOK, e)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rest[:i+len(argsField)-len("null,")])
	switch {
	case len(args) == 0:
		_, _ = w.Write([]byte("null"))
	case json.Valid(args):
		_, _ = w.Write(args)
	default: // never stored (arguments are stored as redacted JSON): show it as text
		_, _ = w.Write([]byte(quote(string(args))))
	}
	_, _ = w.Write(rest[i+len(argsField)-1:])
	_, _ = w.Write([]byte{'\n'})
}
