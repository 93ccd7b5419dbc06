package config

import (
	"strings"
	"testing"
)

// mustParse is the body of a table case that parses a file: with wantErr,
// Parse must fail with an error naming every string of it (mustParse then
// returns nil and the case is done); without, Parse must succeed.
func mustParse(t *testing.T, file string, data []byte, wantErr []string) *Config {
	t.Helper()
	c, err := Parse(file, data)
	if len(wantErr) > 0 {
		if err == nil {
			t.Fatal("Parse accepted the file")
		}
		for _, w := range wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustValidate is the body of a table case that validates a section: with
// wantErr, Validate must fail with a field error whose field contains it;
// without, Validate must succeed.
func mustValidate(t *testing.T, v Validator, wantErr string) {
	t.Helper()
	err := v.Validate()
	if wantErr == "" {
		if err != nil {
			t.Fatalf("Validate = %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("Validate accepted, want an error about %s", wantErr)
	}
	found := false
	for _, e := range flatten(err) {
		if fe, ok := e.(*FieldError); ok && strings.Contains(fe.Field, wantErr) {
			found = true
		}
	}
	if !found {
		t.Fatalf("Validate = %v, want a field error for %s", err, wantErr)
	}
}
