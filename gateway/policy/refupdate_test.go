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
		{name: "create a branch", update: RefUpdate{"refs/heads/feature", UpdateCreate}},
		{name: "fast-forward a branch", update: RefUpdate{"refs/heads/feature", UpdateFastForward}},
		{name: "create a tag", update: RefUpdate{"refs/tags/v1.0", UpdateCreate}},
		{name: "tag named like a protected branch", update: RefUpdate{"refs/tags/main", UpdateCreate}},
		{name: "non-fast-forward", update: RefUpdate{"refs/heads/feature", UpdateForce}, want: "force push"},
		{name: "move a tag forward", update: RefUpdate{"refs/tags/v1.0", UpdateFastForward}, want: "moving an existing tag"},
		{name: "move a tag back", update: RefUpdate{"refs/tags/v1.0", UpdateForce}, want: "force push"},
		{name: "delete", update: RefUpdate{"refs/heads/feature", UpdateDelete}, want: "deleting"},
		{name: "delete a tag", update: RefUpdate{"refs/tags/v1.0", UpdateDelete}, want: "deleting"},
		{name: "protected branch", update: RefUpdate{"refs/heads/main", UpdateFastForward}, want: `protected branch "main"`},
		{name: "protected branch created", update: RefUpdate{"refs/heads/main", UpdateCreate}, want: "protected branch"},
		{name: "protected branch in upper case", update: RefUpdate{"refs/heads/MAIN", UpdateFastForward}, want: "protected branch"},
		{name: "protected glob", update: RefUpdate{"refs/heads/release/2.0", UpdateCreate}, want: `protected branch "release/*"`},
		{name: "prefix in another case", update: RefUpdate{"refs/Heads/main", UpdateCreate}, want: "must be written"},
		{name: "short ref", update: RefUpdate{"main", UpdateCreate}, want: "not a valid ref name"},
		{name: "notes ref", update: RefUpdate{"refs/notes/commits", UpdateCreate}, want: "outside refs/heads/"},
		{name: "remote-tracking ref", update: RefUpdate{"refs/remotes/origin/main", UpdateCreate}, want: "outside refs/heads/"},
		{name: "unclassified", update: RefUpdate{"refs/heads/feature", 0}, want: "could not be classified"},
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
	got := pc.CheckUpdates([]RefUpdate{{"refs/heads/a", UpdateCreate}, {"refs/heads/main", UpdateFastForward}, {"refs/heads/b", UpdateDelete}})
	if len(got) != 2 || got[0].Ref != "refs/heads/main" || got[1].Ref != "refs/heads/b" {
		t.Fatalf("%+v", got)
	}
}
