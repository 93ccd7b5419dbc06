package console

import (
	"html"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
)

// TestPathResourceShown: a tool call's escalation names every path of the
// call in its resource (mcphub pathResource); the RESOURCE column and the
// approval page show them all, escaped like any agent text, and offer no
// directory or domain scope for it.
func TestPathResourceShown(t *testing.T) {
	w := newWorld(t, "x")
	res := `source (read-path+delete-path): "/w/<b>a\u202e"; destination (write-path): "/w/b"`
	w.esc.list = append(w.esc.list, escalation.Escalation{ID: "esc-2", CallID: "call-2", SessionID: "s1", Kind: escalation.KindToolCall,
		Server: "files", Tool: "move_file", Args: []byte(`{"source":"/w/<b>a","destination":"/w/b"}`), Rule: "ask", Reason: "r",
		Resource: res, Status: escalation.StatusPending, CreatedAt: t0.Add(-time.Minute), ExpiresAt: t0.Add(time.Minute)})
	cl := w.signIn(t)
	for _, p := range []string{"/ui/escalations", "/ui/escalation?id=esc-2"} {
		page := cl.get(p).Body.String()
		checkInert(t, p, page)
		for _, want := range []string{"source (read-path&#43;delete-path): &#34;/w/&lt;b&gt;a\\u202e&#34;", "destination (write-path): &#34;/w/b&#34;"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %q", p, html.UnescapeString(want))
			}
		}
	}
	page := cl.get("/ui/escalation?id=esc-2").Body.String()
	if !strings.Contains(page, `value="exact"`) || strings.Contains(page, `value="directory"`) || strings.Contains(page, `value="domain"`) {
		t.Error("a multi-path resource must offer the exact scope only")
	}
}
