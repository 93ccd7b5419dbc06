package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"ironcurtain.dev/e2e/internal/stack"
	"ironcurtain.dev/e2e/internal/testenv"
)

// consoleSession is the agent session of the console scenario.
const consoleSession = "console"

// xssName is a file name an injected agent could choose: markup that would
// run script if the console rendered it as HTML, and a javascript: URL. (No
// "/": it is one path component. The RTL override goes into the file's
// content: in a path, policy refuses it as an ambiguous spelling.)
const xssName = `x"><img src=x onerror="window.__pwned=1"><script>window.__pwned=2 javascript:window.__pwned=3.txt`

// xssContent reads backwards from the override on: "exe.jpg" shows as "gpj.exe".
const xssContent = "invoice\u202Egpj.exe"

// consoleTranscript: a fetch (its egress event is nested under the call in
// the timeline), a write of a file whose name is an XSS payload, and a
// delete of that file (escalated: the operator approves in the console).
var consoleTranscript = `name: e2e-console
steps:
  - code: |
      filesystem.create_directory({ path: "/workspace/console" });
      const page = fetch.http_fetch({ url: "https://` + stack.HostAllowed + `/console", format: "text" });
      filesystem.write_file({ path: ` + jsString("/workspace/console/"+xssName) + `, content: ` + jsString(xssContent) + ` });
      return page;
  - expect: { status: ok, contains: ["hello from ` + stack.HostAllowed + `"] }
    code: |
      filesystem.move_file({ source: ` + jsString("/workspace/console/"+xssName) + `, destination: "/workspace/console/gone.txt" });
      return "moved";
  - expect: { status: ok, contains: ["moved"] }
    final: Done.
`

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chromiumPath finds Debian's chromium. Without it the test is skipped,
// except in CI (CI=true), where it fails.
func chromiumPath(t *testing.T) string {
	return testenv.Require(t, "chromium", "chromium-browser", "google-chrome")
}

// browserLog collects what the page logged: console messages, exceptions,
// log entries (CSP violations are reported there) and the
// securitypolicyviolation events the watcher script turns into console
// errors.
type browserLog struct {
	mu    sync.Mutex
	lines []string
}

func (b *browserLog) add(s string) {
	b.mu.Lock()
	b.lines = append(b.lines, s)
	b.mu.Unlock()
}

func (b *browserLog) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

// watcher runs in every document before the page's own script (CDP
// scripts are not subject to the page's CSP): it reports CSP violations,
// alerts and when each pending escalation row first appears.
const watcher = `
document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP-VIOLATION " + e.violatedDirective + " " + e.blockedURI);
});
window.alert = window.confirm = window.prompt = function () { console.error("DIALOG-OPENED"); };
window.__seen = {};
new MutationObserver(function () {
  document.querySelectorAll("tr.esc.st-pending").forEach(function (tr) {
    var id = tr.getAttribute("data-id");
    if (id && !window.__seen[id]) { window.__seen[id] = Date.now(); }
  });
}).observe(document, { childList: true, subtree: true });
`

// TestConsole drives the operator console in headless Chromium against the
// real stack: sign in; a live agent's escalation appears without a reload;
// the operator approves it in the page; the agent finishes; the timeline
// shows the calls with their egress events and the chain verifies; the
// agent's XSS payload is shown as inert text (no script ran, no CSP
// violation); a cross-site form post is refused. Screenshots go to a
// temporary directory, or to $IC_E2E_SCREENSHOTS (`make screenshots`).
func TestConsole(t *testing.T) {
	chrome := chromiumPath(t)
	s := topology(t)
	ctx := ctxFor(t, 6*time.Minute)
	base, err := s.OpsURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shots := screenshotDir(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	var logs browserLog
	messages := chromedp.Console(bctx) // starts the browser; subscribes now
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			logs.add(m.String() + " (source " + m.Source + ")")
		}
	}()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v\nbrowser log:\n%s", what, err, strings.Join(logs.all(), "\n"))
		}
	}
	if _, err := chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watcher}); err != nil {
		t.Fatalf("adding the watcher script: %v", err)
	}

	// Sign in: a wrong token is refused, the operator token starts a session.
	do("wrong token",
		chromedp.Navigate(base+"/ui/escalations"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "not-the-operator-token-0000"),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("p.error")),
	)
	if body := get(t, bctx, chromedp.Text(chromedp.CSS("p.error"))); !strings.Contains(body, "not a valid operator token") {
		t.Fatalf("wrong token: %q", body)
	}
	do("sign in",
		chromedp.Navigate(base+"/ui/signin"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), s.Secrets.OperatorToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("pending")),
		chromedp.WaitVisible(chromedp.CSS("#live-state.on")), // the event stream is open
	)
	if title := get(t, bctx, chromedp.Title()); !strings.HasPrefix(title, "Escalations") {
		t.Fatalf("after sign-in: title %q", title)
	}
	get(t, bctx, chromedp.Evaluate[int](`window.__noReload = 1`))
	if cookies := get(t, bctx, chromedp.Evaluate[string](`document.cookie`)); strings.Contains(cookies, "ic_console") {
		t.Fatal("the session cookie is readable by script (not HttpOnly)")
	}

	// A live agent's escalation appears without a reload.
	run := startTranscript(ctx, s, consoleSession, "console", consoleTranscript, "console scenario", "-v")
	esc := run.pending(t, ctx, "filesystem", "move_file", 2*time.Minute)
	row := `tr[data-id="` + esc.ID + `"]`
	do("live escalation", chromedp.WaitVisible(chromedp.CSS(row)))
	seenMS := get(t, bctx, chromedp.Evaluate[float64](`window.__seen[`+strconv.Quote(esc.ID)+`] || 0`))
	if !get(t, bctx, chromedp.Evaluate[bool](`window.__noReload === 1`)) {
		t.Fatal("the page reloaded: the escalation did not arrive live")
	}
	created, err := s.SQL(ctx, "SELECT (extract(epoch FROM created_at) * 1000)::bigint FROM escalations WHERE id = "+stack.Quote(esc.ID))
	if err != nil {
		t.Fatal(err)
	}
	createdMS, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		t.Fatalf("created_at %q: %v", created, err)
	}
	latency := time.Duration(int64(seenMS)-createdMS) * time.Millisecond
	t.Logf("FIGURE console live latency: escalation opened → shown in the open console: %s", latency)
	if seenMS == 0 || latency > time.Second {
		t.Errorf("the escalation appeared %s after it was opened, want <= 1s", latency)
	}

	// The payload is shown as text, never as markup.
	rowText := get(t, bctx, chromedp.Text(chromedp.CSS(row)))
	pwned := get(t, bctx, chromedp.Evaluate[any](`window.__pwned === undefined ? null : window.__pwned`))
	imgs := get(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
	scripts := get(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll("script:not([src='/ui/assets/live.js'])").length`))
	if pwned != nil || imgs != 0 || scripts != 0 {
		t.Fatalf("agent markup became live: pwned=%v imgs=%d scripts=%d", pwned, imgs, scripts)
	}
	for _, want := range []string{`<img src=x onerror=`, `<script>window.__pwned=2`} {
		if !strings.Contains(rowText, want) {
			t.Errorf("the pending row does not show %q as text:\n%s", want, rowText)
		}
	}
	screenshot(t, bctx, shots, "escalations.png")

	// Approve in the page (the form post, as without JavaScript).
	do("approve",
		chromedp.SendKeys(chromedp.CSS(row+` input[name="reason"]`), "e2e: approved in the console"),
		chromedp.Click(chromedp.CSS(row+` button.approve`)),
		chromedp.WaitNotPresent(chromedp.CSS(row+` button.approve`)),
	)
	run.finish(t, ctx, 2*time.Minute)
	if e, err := s.Escalation(ctx, esc.ID); err != nil || e.Status != "approved" || e.DecisionReason != "e2e: approved in the console" {
		t.Fatalf("after the console approval: %+v %v", e, err)
	}

	// The timeline: the calls with their egress events, and the chain.
	do("timeline",
		chromedp.Navigate(base+"/ui/timeline?session="+consoleSession),
		chromedp.WaitVisible(chromedp.CSS("table.timeline")),
	)
	calls := get(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll("tbody.call").length`))
	nested := get(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll("tbody.call tr.egress.nested").length`))
	if calls < 4 || nested < 1 {
		t.Fatalf("timeline: %d calls, %d nested egress events", calls, nested)
	}
	if text := get(t, bctx, chromedp.Text(chromedp.CSS("table.timeline"))); !strings.Contains(text, "invoice⟨U+202E⟩gpj.exe") && !strings.Contains(strings.ToLower(text), `invoice\u202egpj.exe`) {
		t.Errorf("the RTL override in the written content is not shown as a mark:\n%s", text)
	}
	if get(t, bctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`)) {
		t.Fatal("agent markup ran on the timeline")
	}
	screenshot(t, bctx, shots, "timeline.png")
	do("verify",
		chromedp.Click(chromedp.CSS("form.verify button")),
		chromedp.WaitVisible(chromedp.ID("verify-result")),
	)
	if verified := get(t, bctx, chromedp.Text(chromedp.ID("verify-result"))); !strings.HasPrefix(strings.TrimSpace(verified), "Intact") {
		t.Fatalf("verify: %q", verified)
	}
	// Mint a session: its token is shown once and stored only as a digest;
	// then revoke it.
	do("create a session",
		chromedp.Navigate(base+"/ui/sessions"),
		chromedp.WaitVisible(chromedp.CSS("form.mint")),
		chromedp.SendKeys(chromedp.CSS(`form.mint input[name="name"]`), "console-run"),
		chromedp.SendKeys(chromedp.CSS(`form.mint input[name="ttl"]`), "1h"),
		chromedp.SendKeys(chromedp.CSS(`form.mint input[name="max_tool_calls"]`), "5"),
		chromedp.SendKeys(chromedp.CSS(`form.mint textarea[name="labels"]`), "team=e2e"),
		chromedp.Click(chromedp.CSS(`form.mint button`)),
		chromedp.WaitVisible(chromedp.ID("minted-token")),
	)
	token := get(t, bctx, chromedp.Value(chromedp.ID("minted-token")))
	if !strings.HasPrefix(token, "icsess_") {
		t.Fatalf("minted token %q", token)
	}
	id, err := s.SQL(ctx, "SELECT id FROM agent_sessions WHERE name = 'console-run' AND created_by = 'operator'")
	if err != nil || id == "" {
		t.Fatalf("the minted session is not in agent_sessions: %q %v", id, err)
	}
	if n, err := s.SQL(ctx, "SELECT count(*) FROM agent_sessions WHERE position("+stack.Quote(token)+" IN row_to_json(agent_sessions)::text) > 0"); err != nil || n != "0" {
		t.Fatalf("the token is stored: %q %v", n, err)
	}
	do("sessions again", chromedp.Navigate(base+"/ui/sessions"), chromedp.WaitVisible(chromedp.CSS("table.rows")))
	if get(t, bctx, chromedp.Evaluate[bool](`document.getElementById("minted-token") !== null`)) {
		t.Fatal("the token is shown a second time")
	}
	revoke := `tr:has(input[name="id"][value="` + id + `"]) form.revoke`
	do("revoke",
		chromedp.SendKeys(chromedp.CSS(revoke+` input[name="reason"]`), "e2e: run over"),
		chromedp.Click(chromedp.CSS(revoke+` button`)),
		chromedp.WaitNotPresent(chromedp.CSS(revoke)),
	)
	if by, err := s.SQL(ctx, "SELECT revoked_by FROM agent_sessions WHERE id = "+stack.Quote(id)+" AND revoked_at IS NOT NULL"); err != nil || by != "operator" {
		t.Fatalf("after the console revoke: revoked_by %q %v", by, err)
	}
	screenshot(t, bctx, shots, "sessions.png")
	do("policy", chromedp.Navigate(base+"/ui/policy"), chromedp.WaitVisible(chromedp.CSS("dl.detail")))
	screenshot(t, bctx, shots, "policy.png")

	// A cross-site form post (an attacker's page the signed-in operator
	// visits) is refused: no CSRF token, another origin.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/ui/sessions/create">
<input name="name" value="csrf-attack"></form><script>document.getElementById("f").submit()</script>`, base)
	}))
	defer attacker.Close()
	for _, origin := range []string{attacker.URL, strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1)} {
		do("cross-site post from "+origin, chromedp.Navigate(origin), chromedp.WaitVisible(chromedp.CSS("main")))
		text := get(t, bctx, chromedp.Text(chromedp.CSS("main")))
		if !strings.Contains(text, "Refused") && !strings.Contains(text, "Sign in first") {
			t.Errorf("cross-site post from %s was not refused: %q", origin, text)
		}
	}
	if n, err := s.SQL(ctx, "SELECT count(*) FROM agent_sessions WHERE name = 'csrf-attack'"); err != nil || n != "0" {
		t.Errorf("cross-site post created a session: %q %v", n, err)
	}

	// Nothing the agent wrote ran, and the console's own pages logged no
	// CSP violation, dialog or exception.
	for _, l := range logs.all() {
		if strings.Contains(l, "CSP-VIOLATION") || strings.Contains(l, "Content Security Policy") ||
			strings.Contains(l, "DIALOG") || strings.HasPrefix(l, "exception:") {
			t.Errorf("browser: %s", l)
		}
	}
	t.Logf("browser log: %d entries", len(logs.all()))
}

// envScreenshots names the directory TestConsole writes its screenshots
// to. Unset, they go to a temporary directory (a test run never changes the
// tracked files); `make screenshots` sets it to docs/console to refresh the
// images of docs/console.md.
const envScreenshots = "IC_E2E_SCREENSHOTS"

// screenshotDir is $IC_E2E_SCREENSHOTS, or a temporary directory of t.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv(envScreenshots); d != "" {
		return d
	}
	return t.TempDir()
}

// get runs one action and returns its value.
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := get(t, ctx, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", filepath.Join(dir, name), len(png))
}
