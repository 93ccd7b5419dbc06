package annotate

import (
	"testing"

	"ironcurtain.dev/gateway/policy"
)

func TestKeepPins(t *testing.T) {
	pin := &policy.ToolPin{Hash: policy.PinPrefix + "aa", Description: "Echo text."}
	prev := &policy.ServerAnnotations{Tools: []policy.ToolAnnotation{
		{Tool: "echo", Server: "notes", Pin: pin},
		{Tool: "gone", Server: "notes", Pin: &policy.ToolPin{Hash: policy.PinPrefix + "bb"}},
		{Tool: "unpinned", Server: "notes"},
	}}
	anns := []policy.ToolAnnotation{{Tool: "echo", Server: "notes"}, {Tool: "unpinned", Server: "notes"}, {Tool: "new", Server: "notes"}}
	keepPins(prev, anns)
	if anns[0].Pin == nil || *anns[0].Pin != *pin || anns[0].Pin == pin {
		t.Errorf("echo pin = %+v, want a copy of %+v", anns[0].Pin, pin)
	}
	if anns[1].Pin != nil || anns[2].Pin != nil {
		t.Errorf("pins created by the compiler: %+v %+v", anns[1].Pin, anns[2].Pin)
	}
	keepPins(nil, anns) // no previous annotations: nothing happens
}
