package opsapi

import (
	"testing"

	"ironcurtain.dev/gateway/internal/codecheck"
)

// TestRequestsDecodedOnlyStrictly is a repository rule: the ops API reads
// what a client sends only through strictjson (decodeBody) and its one
// query parser (params). encoding/json's decoders may read only the API's
// own answers (the Go client) and the gateway's own rows, in the functions
// listed.
func TestRequestsDecodedOnlyStrictly(t *testing.T) {
	allowed := map[string]bool{
		"send": true, "do": true, "readPage": true, // the client reading the API's answers
		"scanSession": true, // a row the gateway wrote
	}
	checkNoLooseJSON(t, ".", allowed)
}

// checkNoLooseJSON fails for each finding of codecheck.LooseJSON.
func checkNoLooseJSON(t *testing.T, dir string, allowed map[string]bool) {
	t.Helper()
	found, err := codecheck.LooseJSON(dir, allowed)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}
