package policy

import "testing"

// TestRoleIdxAgreesWithIndex: the slot lookup finds every registered role at
// its position and nothing else, and is in use (no two roles share a slot).
func TestRoleIdxAgreesWithIndex(t *testing.T) {
	if !roleSlotsOK {
		t.Fatal("two registered roles share a slot: roleIdx falls back to the map")
	}
	var probes []Role
	for _, d := range roleList {
		r := d.Role
		probes = append(probes, r, r+"x", r[:len(r)-1], Role(string(r[0]-1)+string(r[1:])), Role(string(r[:len(r)-1])+"?"))
	}
	probes = append(probes, "", "x", "READ-PATH", "read-path\x00", "a-path-of-32-bytes-long-aaaaaaaa"+"read-path")
	for _, r := range probes {
		want, wantOK := roleIndex[r]
		got, ok := roleIdx(r)
		if ok != wantOK || got != want {
			t.Errorf("roleIdx(%q) = %d, %v; the map says %d, %v", r, got, ok, want, wantOK)
		}
	}
}
