package audit

import (
	"testing"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestPGPolicyVersionChain: decisions with a policy version are stored with
// it and verify; editing or blanking the version is caught; records
// without one (as written before migration 0007) verify next to them.
func TestPGPolicyVersionChain(t *testing.T) {
	tests := []struct {
		name   string
		tamper string
		want   string // call id of the broken row, "" when none
	}{
		{name: "untouched"},
		{name: "version blanked", tamper: `UPDATE tool_calls SET policy_version = '' WHERE call_id = 'c2'`, want: "c2"},
		{name: "version edited", tamper: `UPDATE tool_calls SET policy_version = 'ffffffffffffffff' WHERE call_id = 'c2'`, want: "c2"},
		{name: "version added to an old record", tamper: `UPDATE tool_calls SET policy_version = 'ffffffffffffffff' WHERE call_id = 'c1'`, want: "c1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Migrated())
			ctx := pgCtx(t)
			s, _ := newTestSink(t, db, Options{})
			for i, c := range []string{"c1", "c2", "c3"} {
				d := decision("s", c)
				if i > 0 {
					d.PolicyVersion = "0123456789abcdef"
				}
				if err := s.Record(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			var stored string
			if err := db.Pool.QueryRow(ctx, `SELECT policy_version FROM tool_calls WHERE call_id = 'c3'`).Scan(&stored); err != nil || stored != "0123456789abcdef" {
				t.Fatalf("stored policy_version = %q, %v", stored, err)
			}
			versions := map[string]string{}
			if err := QueryEach(ctx, db.Pool, Filter{Session: "s"}, func(c *ToolCall) error {
				versions[c.CallID] = c.PolicyVersion
				return nil
			}); err != nil || versions["c1"] != "" || versions["c2"] != "0123456789abcdef" {
				t.Fatalf("queried versions %v, %v", versions, err)
			}
			if tt.tamper != "" {
				if _, err := db.Pool.Exec(ctx, tt.tamper); err != nil {
					t.Fatal(err)
				}
			}
			checks, err := Verify(ctx, db.Pool, "s")
			if err != nil || len(checks) != 1 {
				t.Fatalf("verify: %+v, %v", checks, err)
			}
			b := checks[0].Break
			switch {
			case tt.want == "" && b != nil:
				t.Fatalf("break %+v in an untouched chain", *b)
			case tt.want != "" && (b == nil || b.RowID != tt.want):
				t.Fatalf("break = %+v, want row %s", b, tt.want)
			}
		})
	}
}
