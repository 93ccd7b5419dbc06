package audit

import (
	"reflect"
	"testing"
	"time"
)

func TestNewEgressEvent(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	got := NewEgressEvent(EgressFields{ID: "id", SessionID: "s", ToolCallID: "c", TraceID: "tr", Time: at,
		Kind: "fetch", Method: "GET", Host: "example.com", Port: 443})
	want := &EgressEvent{ID: "id", SessionID: "s", ToolCallID: "c", TraceID: "tr", Time: at,
		Kind: "fetch", Method: "GET", Host: "example.com", Port: 443}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NewEgressEvent = %+v, want %+v", got, want)
	}
	// Every field of EgressFields reaches the record.
	f := reflect.TypeOf(EgressFields{})
	ev := reflect.ValueOf(*got)
	for i := range f.NumField() {
		if ev.FieldByName(f.Field(i).Name).IsZero() {
			t.Errorf("EgressFields.%s is not copied", f.Field(i).Name)
		}
	}
}
