package policy

import (
	"strings"
	"testing"
)

func TestCheckUpdates(t *testing.T) {
	pc, err := NewPushChecker("/workspace", []string{"main", "release/*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		update RefUpdate
		want   string // "" allowed, else a substring of the reason
	}{
		{name: "create a branch", update: RefUpdate{Ref: "refs/heads/feature", Kind: UpdateCreate}},
		{name: "fast-forward a branch", update: RefUpdate{Ref: "refs/heads/feature", Kind: UpdateFastForward}},
		{name: "create a tag", update: RefUpdate{Ref: "refs/tags/v1.0", Kind: UpdateCreate}},
		{name: "tag named like a protected branch", update: RefUpdate{Ref: "refs/tags/main", Kind: UpdateCreate}},
		{name: "non-fast-forward", update: RefUpdate{Ref: "refs/heads/feature", Kind: UpdateForce}, want: "force push"},
		{name: "move a tag forward", update: RefUpdate{Ref: "refs/tags/v1.0", Kind: UpdateFastForward}, want: "moving an existing tag"},
		{name: "move a tag back", update: RefUpdate{Ref: "refs/tags/v1.0", Kind: UpdateForce}, want: "force push"},
		{name: "delete", update: RefUpdate{Ref: "refs/heads/feature", Kind: UpdateDelete}, want: "deleting"},
		{name: "delete a tag", update: RefUpdate{Ref: "refs/tags/v1.0", Kind: UpdateDelete}, want: "deleting"},
		{name: "protected branch", update: RefUpdate{Ref: "refs/heads/main", Kind: UpdateFastForward}, want: `protected branch "main"`},
		{name: "protected branch created", update: RefUpdate{Ref: "refs/heads/main", Kind: UpdateCreate}, want: "protected branch"},
		{name: "protected branch in upper case", update: RefUpdate{Ref: "refs/heads/MAIN", Kind: UpdateFastForward}, want: "protected branch"},
		{name: "protected glob", update: RefUpdate{Ref: "refs/heads/release/2.0", Kind: UpdateCreate}, want: `protected branch "release/*"`},
		{name: "prefix in another case", update: RefUpdate{Ref: "refs/Heads/main", Kind: UpdateCreate}, want: "must be written"},
		{name: "short ref", update: RefUpdate{Ref: "main", Kind: UpdateCreate}, want: "not a valid ref name"},
		{name: "notes ref", update: RefUpdate{Ref: "refs/notes/commits", Kind: UpdateCreate}, want: "outside refs/heads/"},
		{name: "remote-tracking ref", update: RefUpdate{Ref: "refs/remotes/origin/main", Kind: UpdateCreate}, want: "outside refs/heads/"},
		{name: "unclassified", update: RefUpdate{Ref: "refs/heads/feature", Kind: 0}, want: "could not be classified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pc.CheckUpdates([]RefUpdate{tc.update})
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("refused: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Ref != tc.update.Ref || !strings.Contains(got[0].Reason, tc.want) {
				t.Fatalf("got %+v, want one refusal with %q", got, tc.want)
			}
		})
	}
	// Every refused ref of a push is named, in order.
	got := pc.CheckUpdates([]RefUpdate{{Ref: "refs/heads/a", Kind: UpdateCreate}, {Ref: "refs/heads/main", Kind: UpdateFastForward}, {Ref: "refs/heads/b", Kind: UpdateDelete}})
	if len(got) != 2 || got[0].Ref != "refs/heads/main" || got[1].Ref != "refs/heads/b" {
		t.Fatalf("%+v", got)
	}
}
