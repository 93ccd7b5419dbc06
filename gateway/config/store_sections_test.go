package config

import (
	"testing"
	"time"
)

func TestStoreSectionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		v       Validator
		wantErr string // substring naming the field; "" = valid
	}{
		{name: "audit defaults", v: &AuditConfig{}},
		{name: "audit ok", v: &AuditConfig{MaxBatch: 100, QueueSize: 1000, Linger: time.Millisecond, Flushers: 2}},
		{name: "audit negative batch", v: &AuditConfig{MaxBatch: -1}, wantErr: "max_batch"},
		{name: "audit huge linger", v: &AuditConfig{Linger: time.Minute}, wantErr: "linger"},
		{name: "audit flushers", v: &AuditConfig{Flushers: 1000}, wantErr: "flushers"},
		{name: "escalation defaults", v: &EscalationConfig{}},
		{name: "escalation ok", v: &EscalationConfig{Timeout: time.Minute, WebhookURL: "https://hooks.slack.com/services/x"}},
		{name: "escalation sub-second timeout", v: &EscalationConfig{Timeout: time.Millisecond}, wantErr: "timeout"},
		{name: "escalation webhook scheme", v: &EscalationConfig{WebhookURL: "file:///etc/passwd"}, wantErr: "webhook_url"},
		{name: "ops defaults", v: &OpsConfig{}},
		{name: "ops listen", v: &OpsConfig{Listen: "8081"}, wantErr: "listen"},
		{name: "ops token file", v: &OpsConfig{OperatorTokenFiles: map[string]string{"alice": ""}}, wantErr: "operator_token_files.alice"},
		{name: "ops metrics token file", v: &OpsConfig{MetricsTokenFiles: map[string]string{"prometheus": "/run/secrets/m"}}},
		{name: "ops metrics token empty path", v: &OpsConfig{MetricsTokenFiles: map[string]string{"prometheus": ""}}, wantErr: "metrics_token_files.prometheus"},
		{name: "ops metrics token empty name", v: &OpsConfig{MetricsTokenFiles: map[string]string{" ": "/run/secrets/m"}}, wantErr: "metrics_token_files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustValidate(t, tt.v, tt.wantErr)
		})
	}
	if (&OpsConfig{}).ListenAddr() != DefaultOpsListen {
		t.Fatal("default ops listen address")
	}
}
