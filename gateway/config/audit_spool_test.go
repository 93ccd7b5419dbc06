package config

import (
	"strings"
	"testing"
	"time"
)

func TestAuditSpoolSettings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		yaml     string
		wantDir  string
		wantMax  int
		wantWait time.Duration
		wantErr  string // substring of the error; "" = valid
	}{
		{name: "defaults", yaml: "audit: {}\n", wantDir: DefaultAuditSpoolDir},
		{name: "set", yaml: "audit:\n  spool_dir: /state/spool\n  spool_max_records: 500\n  outcome_wait: 2s\n",
			wantDir: "/state/spool", wantMax: 500, wantWait: 2 * time.Second},
		{name: "relative dir", yaml: "audit:\n  spool_dir: spool\n", wantErr: "audit.spool_dir"},
		{name: "negative bound", yaml: "audit:\n  spool_max_records: -1\n", wantErr: "audit.spool_max_records"},
		{name: "long wait", yaml: "audit:\n  outcome_wait: 2h\n", wantErr: "audit.outcome_wait"},
		{name: "unknown key still refused", yaml: "audit:\n  spool_dirs: /x\n", wantErr: "spool_dirs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("/cfg/gateway.yaml", withFetch(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse = %v, want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Audit.SpoolPath(); got != tc.wantDir {
				t.Errorf("SpoolPath = %q, want %q", got, tc.wantDir)
			}
			if c.Audit.SpoolMaxRecords != tc.wantMax || c.Audit.OutcomeWait != tc.wantWait {
				t.Errorf("spool_max_records %d outcome_wait %v, want %d %v", c.Audit.SpoolMaxRecords, c.Audit.OutcomeWait, tc.wantMax, tc.wantWait)
			}
		})
	}
}
