package githubrelay

import (
	"testing"
)

// TestOwnershipLookupEgressNamesSession: the author lookup the relay makes
// before deciding pr_edit/pr_close goes through the github tool server,
// which records one egress row per API request; that row names the
// session (there is no call id yet), and the forwarded request's row
// carries its call's id.
func TestOwnershipLookupEgressNamesSession(t *testing.T) {
	e := newEnv(t, false)
	// The gateway opens #11 through the relay, so it is its own.
	if code, body, _ := e.do(t, "POST", "/github/repos/acme/app/pulls", `{"title":"t","head":"feature","base":"main"}`, nil); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	before := len(e.sink.Egress())
	if code, body, _ := e.do(t, "PATCH", "/github/repos/acme/app/pulls/11", `{"title":"new"}`, nil); code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var lookups, forwarded int
	for _, ev := range e.sink.Egress()[before:] {
		switch ev.Kind {
		case "github-api":
			lookups++
			if ev.SessionID != "s1" || ev.ToolCallID != "" || ev.Method != "GET" {
				t.Errorf("lookup row %+v", ev)
			}
		case "github":
			forwarded++
			if ev.SessionID != "s1" || ev.ToolCallID == "" {
				t.Errorf("forwarded row %+v", ev)
			}
		}
	}
	if lookups == 0 || forwarded != 1 {
		t.Fatalf("%d lookup rows, %d forwarded rows: %s", lookups, forwarded, e.sink.all())
	}
}
