package transcript

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		wantErr string
	}{
		{name: "yaml", src: "name: x\nsteps:\n  - code: return 1\n  - expect: {status: ok}\n    final: done\n"},
		{name: "json", src: `{"steps":[{"code":"return 1"},{"final":"done","usage":{"input":1,"output":2}}]}`},
		{name: "no steps", src: "name: x\n", wantErr: "no steps"},
		{name: "both code and final", src: "steps:\n  - code: x\n    final: y\n", wantErr: "steps[0]: exactly one"},
		{name: "neither", src: "steps:\n  - say: hi\n", wantErr: "steps[0]: exactly one"},
		{name: "misspelt key", src: "steps:\n  - cod: x\n", wantErr: "field cod not found"},
		{name: "expect on first step", src: "steps:\n  - expect: {status: ok}\n    final: y\n", wantErr: "steps[0].expect"},
		{name: "bad status", src: "steps:\n  - code: x\n  - expect: {status: maybe}\n    final: y\n", wantErr: "steps[1].expect.status"},
		{name: "not yaml", src: "steps: [", wantErr: "decoding transcript"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestExpectCheck(t *testing.T) {
	e := &Expect{Status: "error", Contains: []string{"denied"}, NotContains: []string{"secret"}}
	tests := []struct {
		name    string
		content string
		isError bool
		wantErr string
	}{
		{name: "met", content: "denied by policy", isError: true},
		{name: "status mismatch", content: "denied", isError: false, wantErr: "want an error"},
		{name: "missing text", content: "refused", isError: true, wantErr: `lacks "denied"`},
		{name: "forbidden text", content: "denied secret", isError: true, wantErr: `contains "secret"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Check(2, tc.content, tc.isError)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrExpectation) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzParse: any input is either rejected with an error or yields a
// transcript whose steps each have exactly one of code and final, and whose
// expectations can be checked; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"steps:\n  - code: return 1\n  - expect: {status: ok, contains: [x]}\n    final: y\n",
		`{"steps":[{"final":"x","usage":{"input":1,"output":2}}]}`,
		"steps: [{code: '', final: ''}]", "steps: 3", "- a\n- b", "&a [*a]", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		tr, err := Parse(raw)
		if err != nil {
			return
		}
		for i, s := range tr.Steps {
			if (strings.TrimSpace(s.Code) == "") == (strings.TrimSpace(s.Final) == "") {
				t.Fatalf("step %d has both or neither of code and final", i)
			}
			if s.Expect != nil {
				_ = s.Expect.Check(i+1, "status: ok", false)
				_ = s.Expect.Check(i+1, "status: error", true)
			}
		}
	})
}
