package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// replicaLoopSession is the session of the shared loop-breaker scenario:
// it ends cooling down (stopped by the operator), so it is its own.
const replicaLoopSession = "replicas-loop"

func init() { sessions = append(sessions, replicaLoopSession) }

// loopAcross: the loop breaker is one over both replicas (its state is in
// Postgres). 40 denied calls alternating A and B pause the session on the
// 41st (on A); while that pause waits, a call on B is refused at once
// naming the pause's escalation (B alone saw only 20 denials); the
// operator denies on B; both replicas then refuse the session's calls for
// the cooldown.
func loopAcross(t *testing.T, ctx context.Context, b *stack.Stack, endpoints []string) {
	const denials = 40 // loop_breaker.consecutive_denials: the default (the suite raises only the rate and identical limits)
	loop := probePlan{Endpoints: endpoints, Workers: 1}
	for i := range denials + 1 {
		loop.Calls = append(loop.Calls, probeCall{Endpoint: i % 2, Tool: "filesystem__write_file",
			Args: map[string]string{"path": fmt.Sprintf("/etc/ic-e2e-replica-loop-%d.txt", i), "content": "again\n"}})
	}
	type result struct {
		rep probeReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := runPlanAs(ctx, b, replicaLoopSession, loop)
		done <- result{r, err}
	}()
	pause, err := b.WaitPending(ctx, replicaLoopSession, "filesystem", "write_file", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if pause.Rule != "loop-breaker" || !strings.Contains(pause.Reason, strconv.Itoa(denials)+" denied calls in a row") {
		t.Fatalf("pending escalation %+v, want the loop breaker's pause after %d denials over both replicas", pause, denials)
	}
	t.Logf("replicas: session paused by the loop breaker (escalation %s): %s", pause.ID, pause.Reason)

	onB := probePlan{Endpoints: endpoints, Workers: 1, Calls: []probeCall{writeCall(1, replicaDir+"/loop-on-b.txt")}}
	rep, err := runPlanAs(ctx, b, replicaLoopSession, onB)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Calls[0]; !c.IsError || !strings.Contains(c.Text, "paused until an operator decides escalation "+pause.ID) {
		t.Fatalf("a call on B while A's pause waits: error %v %q, want refused naming %s", c.IsError, c.Text, pause.ID)
	}
	if ok, err := b.WorkspaceExists(ctx, "replicas/loop-on-b.txt"); err != nil || ok {
		t.Fatalf("the refused write on B ran (%v)", err)
	}

	if _, err := b.Decide(ctx, pause.ID, false, "e2e operator stops the loop on replica B", ""); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if last := res.rep.Calls[len(res.rep.Calls)-1]; !last.IsError || !strings.Contains(last.Text, "an operator stopped them until") {
		t.Fatalf("the pausing call on A after the denial: %q", last.Text)
	}
	after := probePlan{Endpoints: endpoints, Workers: 1, Calls: []probeCall{writeCall(0, replicaDir+"/loop-a.txt"), writeCall(1, replicaDir+"/loop-b.txt")}}
	rep, err = runPlanAs(ctx, b, replicaLoopSession, after)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range rep.Calls {
		if !c.IsError || !strings.Contains(c.Text, "an operator stopped this session's tool calls until") {
			t.Errorf("replica %s during the cooldown: error %v %q, want refused", "AB"[i:i+1], c.IsError, c.Text)
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleClient drives one replica's console with a cookie jar of its own
// (the same cookie is copied between replicas by the test).
type consoleClient struct {
	base   string
	cookie *http.Cookie
}

func (c *consoleClient) do(ctx context.Context, method, path string, form url.Values) (int, string, *http.Response, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, "", nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", c.base)
	}
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	cl := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(b), resp, err
}

// consoleAcross: an operator signs in to the console on A; the cookie
// works on B (the sign-in is in Postgres) with the same CSRF token; a
// sign-out on B ends it on A.
func consoleAcross(t *testing.T, ctx context.Context, a, b *stack.Stack) {
	baseA, err := a.OpsURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	baseB, err := b.OpsURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ca := &consoleClient{base: baseA}
	code, _, resp, err := ca.do(ctx, http.MethodPost, "/ui/signin", url.Values{"token": {b.Secrets.OperatorToken}})
	if err != nil || code != http.StatusSeeOther {
		t.Fatalf("sign-in on A: %d %v", code, err)
	}
	for _, ck := range resp.Cookies() {
		if strings.HasSuffix(ck.Name, "ic_console") {
			ca.cookie = ck
		}
	}
	if ca.cookie == nil {
		t.Fatal("sign-in on A set no cookie")
	}
	code, pageA, _, err := ca.do(ctx, http.MethodGet, "/ui/escalations", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("escalations on A: %d %v", code, err)
	}
	cb := &consoleClient{base: baseB, cookie: ca.cookie}
	code, pageB, _, err := cb.do(ctx, http.MethodGet, "/ui/escalations", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("A's console session on B: %d %v, want 200", code, err)
	}
	mA, mB := csrfField.FindStringSubmatch(pageA), csrfField.FindStringSubmatch(pageB)
	if mA == nil || mB == nil || mA[1] != mB[1] {
		t.Fatal("the replicas show different CSRF tokens for one session")
	}
	if code, _, _, err := cb.do(ctx, http.MethodPost, "/ui/signout", url.Values{"csrf": {mB[1]}}); err != nil || code != http.StatusSeeOther {
		t.Fatalf("sign-out on B: %d %v", code, err)
	}
	if code, _, resp, err := ca.do(ctx, http.MethodGet, "/ui/escalations", nil); err != nil || code != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/signin" {
		t.Fatalf("A after the sign-out on B: %d %v, want a redirect to sign-in", code, err)
	}
	t.Log("replicas: a console sign-in on A worked on B; sign-out on B ended it on A")
}

// budgetAcross: the auto-approver spends from one daily budget: today's
// row counts every model call any replica made (the rule escalations of
// approveAcross were reviewed on A; the suite's other scenarios on B).
func budgetAcross(t *testing.T, ctx context.Context, b *stack.Stack) {
	out, err := b.SQL(ctx, `SELECT (SELECT calls FROM auto_approver_budget WHERE day = (now() AT TIME ZONE 'UTC')::date),
  count(*) FILTER (WHERE auto_outcome IN ('approved', 'human', 'model_denied', 'malformed', 'timeout')),
  count(*) FILTER (WHERE auto_outcome = 'error')
  FROM escalations WHERE auto_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(out, "|")
	if len(f) != 3 || f[0] == "" {
		t.Fatalf("no budget row for today (%q): the budget is not shared", out)
	}
	calls, _ := strconv.Atoi(f[0])
	asked, _ := strconv.Atoi(f[1])
	errs, _ := strconv.Atoi(f[2])
	// A model call that failed may or may not have been reserved (the
	// model API's failure, or the history before it).
	if asked == 0 || calls < asked || calls > asked+errs {
		t.Fatalf("budget row: %d calls; reviews that asked the model: %d (+%d errors)", calls, asked, errs)
	}
	t.Logf("replicas: one auto-approver budget: %d calls today over both replicas", calls)
}
