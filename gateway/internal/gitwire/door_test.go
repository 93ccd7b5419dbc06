package gitwire

import (
	"bytes"
	"strings"
	"testing"
)

// TestUpdateRequestForTheDoor covers what the git HTTP door relies on: a
// deletion needs no delete-refs from the client (git never sends it; the
// server advertises it), DeferRefCheck leaves ref policy to the caller but
// still refuses unprintable names, and a refused request keeps the
// capabilities so the refusal can go on the client's side band.
func TestUpdateRequestForTheDoor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       []byte
		lim      Limits
		err      string
		band     int // the capabilities kept (Band) on error
		commands int
	}{
		{name: "delete as git sends it", in: request("", idA+" "+zero+" refs/heads/x\x00 report-status side-band-64k", ""), commands: 1},
		{name: "remote-tracking ref deferred", lim: Limits{DeferRefCheck: true}, in: request("", zero+" "+idA+" refs/remotes/origin/x\x00 report-status", ""), commands: 1},
		{name: "remote-tracking ref checked", in: request("", zero+" "+idA+" refs/remotes/origin/x\x00 report-status side-band-64k", ""), err: "outside refs/heads/", band: MaxPayload - 1},
		{name: "escape deferred still refused", lim: Limits{DeferRefCheck: true}, in: request("", zero+" "+idA+" refs/heads/a\x1bb\x00 report-status side-band-64k", ""), err: "printable", band: MaxPayload - 1},
		{name: "long ref deferred refused", lim: Limits{DeferRefCheck: true}, in: request("", zero+" "+idA+" refs/heads/"+strings.Repeat("a", MaxRefName)+"\x00 report-status", ""), err: "at most"},
		{name: "caps kept on a later error", in: request("", zero+" "+idA+" refs/heads/a\x00 report-status side-band", zero+" "+idA+" refs/heads/a", ""), err: "twice", band: 999 - 4 - 1},
		{name: "no caps before the first line", in: []byte("00zz"), err: "header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ReadUpdateRequest(NewReader(bytes.NewReader(tc.in)), "sha1", tc.lim)
			if tc.err == "" {
				if err != nil || len(u.Commands) != tc.commands {
					t.Fatalf("got %+v, %v", u, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if len(u.Commands) != 0 || u.Capabilities.Band() != tc.band {
				t.Fatalf("kept %+v (band %d), want band %d and no commands", u, u.Capabilities.Band(), tc.band)
			}
		})
	}
}
