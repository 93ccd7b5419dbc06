package audit

import (
	"bytes"
	"testing"
)

// TestChainPolicyVersion: a decision without a policy version hashes as
// records did before migration 0007; a version is covered, and blanking
// it changes the hash.
func TestChainPolicyVersion(t *testing.T) {
	old := decision("s", "c1")
	kind, sess, fields := chainFields(old)
	if len(fields) != 12 {
		t.Fatalf("a decision without a version hashes %d fields, want the 12 of records before 0007", len(fields))
	}
	before := chainHash(genesis, kind, sess, 1, fields)

	withVersion := decision("s", "c1")
	withVersion.PolicyVersion = "0123456789abcdef"
	kind, sess, fields = chainFields(withVersion)
	after := chainHash(genesis, kind, sess, 1, fields)
	if bytes.Equal(before, after) {
		t.Fatal("the policy version is not covered by the chain")
	}
	other := *withVersion
	other.PolicyVersion = "fedcba9876543210"
	kind, sess, fields = chainFields(&other)
	if bytes.Equal(after, chainHash(genesis, kind, sess, 1, fields)) {
		t.Fatal("two policy versions hash alike")
	}
}
