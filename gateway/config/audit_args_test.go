package config

import (
	"strings"
	"testing"
)

func TestAuditArgsSettings(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		wantValue int
		wantWhole int
		wantErr   string // substring of the error; "" = valid
	}{
		{name: "defaults", yaml: "audit: {}\n"},
		{name: "set", yaml: "audit:\n  max_arg_value_bytes: 8192\n  max_args_bytes: 1048576\n", wantValue: 8192, wantWhole: 1 << 20},
		{name: "value too small", yaml: "audit:\n  max_arg_value_bytes: 16\n", wantErr: "audit.max_arg_value_bytes"},
		{name: "value too large", yaml: "audit:\n  max_arg_value_bytes: 2097152\n", wantErr: "audit.max_arg_value_bytes"},
		{name: "whole below twice the default value", yaml: "audit:\n  max_args_bytes: 4096\n", wantErr: "audit.max_args_bytes"},
		{name: "whole below twice the value", yaml: "audit:\n  max_arg_value_bytes: 1024\n  max_args_bytes: 1500\n", wantErr: "audit.max_args_bytes"},
		{name: "whole too large", yaml: "audit:\n  max_args_bytes: 1073741824\n", wantErr: "audit.max_args_bytes"},
		{name: "negative", yaml: "audit:\n  max_arg_value_bytes: -1\n", wantErr: "audit.max_arg_value_bytes"},
		{name: "unknown key still refused", yaml: "audit:\n  max_arg_bytes: 10\n", wantErr: "max_arg_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/cfg/gateway.yaml", withFetch(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Audit.MaxArgValueBytes != tt.wantValue || c.Audit.MaxArgsBytes != tt.wantWhole {
				t.Fatalf("parsed %+v", c.Audit.AuditArgsConfig)
			}
		})
	}
}
