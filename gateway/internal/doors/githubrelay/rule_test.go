package githubrelay

import (
	"testing"

	"ironcurtain.dev/gateway/internal/codecheck"
)

// TestRequestsDecodedOnlyStrictly is a repository rule: the relay reads
// what the agent sends only through strictjson. encoding/json's decoders
// (case-insensitive names, last duplicate wins, trailing data ignored by
// a Decoder) may read only GitHub's own answers, in the functions listed.
func TestRequestsDecodedOnlyStrictly(t *testing.T) {
	allowed := map[string]bool{"resolveNode": true} // GitHub's answer to the relay's node lookup
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
