package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// replicaSession is the agent session of the replica scenarios: one
// session whose calls go through both gateways. replicaSession2 is a
// second session for the throughput comparison (one session per replica,
// as an agent sticks to one replica in Kubernetes).
const (
	replicaSession  = "replicas"
	replicaSession2 = "replicas2"
)

// replicaDir is where the replica scenarios write in the workspace.
const replicaDir = "/workspace/replicas"

// probePlan is the input of `ic-e2e-probe mcp` (e2e/cmd/probe/mcp.go).
type probePlan struct {
	Endpoints      []string    `json:"endpoints"`
	Calls          []probeCall `json:"calls"`
	Workers        int         `json:"workers"`
	TimeoutSec     int         `json:"timeout_sec,omitempty"`
	SkipAfterError bool        `json:"skip_after_error,omitempty"`
	SwapSessions   bool        `json:"swap_sessions,omitempty"`
	ListTools      bool        `json:"list_tools,omitempty"`
}

type probeCall struct {
	Endpoint int               `json:"endpoint"`
	Tool     string            `json:"tool"`
	Args     map[string]string `json:"args"`
}

type probeReport struct {
	Start int64    `json:"start_ns"`
	End   int64    `json:"end_ns"`
	Tools []string `json:"tools"`
	Calls []struct {
		Endpoint int    `json:"endpoint"`
		Start    int64  `json:"start_ns"`
		End      int64  `json:"end_ns"`
		IsError  bool   `json:"is_error"`
		Text     string `json:"text"`
		Err      string `json:"err"`
	} `json:"calls"`
}

// runPlan runs the probe's MCP client in the agent container with the
// agent token of replicaSession.
func runPlan(ctx context.Context, s *stack.Stack, plan probePlan) (probeReport, error) {
	return runPlanAs(ctx, s, replicaSession, plan)
}

// runPlanAs runs a plan with the agent token of session.
func runPlanAs(ctx context.Context, s *stack.Stack, session string, plan probePlan) (probeReport, error) {
	var rep probeReport
	in, err := json.Marshal(plan)
	if err != nil {
		return rep, err
	}
	err = s.Probe(ctx, session, in, &rep, "mcp")
	return rep, err
}

// writeCall is a filesystem__write_file call on endpoint ep.
func writeCall(ep int, path string) probeCall {
	return probeCall{Endpoint: ep, Tool: "filesystem__write_file", Args: map[string]string{"path": path, "content": "replica scenario " + path + "\n"}}
}

// requireOK fails unless every call of the report was answered without
// a tool error.
func requireOK(t *testing.T, what string, rep probeReport) {
	t.Helper()
	for i, c := range rep.Calls {
		if c.Err != "" || c.IsError {
			t.Fatalf("%s: call %d on endpoint %d: err %q, tool error %v: %s", what, i, c.Endpoint, c.Err, c.IsError, c.Text)
		}
	}
}

// TestReplicas runs two gateway containers on one Postgres (issue 15
// item 2, DESIGN §17): the suite's gateway ("B", which stays) and a
// replica ("A") started for this test. One agent session uses both.
//
//   - an escalation opened by a call on A is approved through B's ops
//     API and A's waiter resumes (timed: approve sent → the agent has the
//     result);
//   - calls of the session alternate between A and B and keep one linear
//     hash chain (`ironcurtain audit verify` on both replicas);
//   - an MCP session id of one replica is refused by the other;
//   - audited calls per second through one replica and through two;
//   - state shared in Postgres: a loop broken on A is broken on B, a
//     console sign-in on A works on B, one auto-approver budget;
//   - A is killed mid-burst while a call waits for an escalation on it:
//     every file written has its allow decision row, the waiting call did
//     not run, the chain verifies, and B serves the session at once.
func TestReplicas(t *testing.T) {
	b := topology(t)
	ctx := ctxFor(t, 5*time.Minute)
	begin := time.Now()
	a, err := b.StartReplica(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica A logs (last 80 lines):\n%s", lastLines(a.GatewayLogs(context.WithoutCancel(ctx)), 80))
		}
		if err := a.RemoveReplica(context.WithoutCancel(ctx)); err != nil {
			t.Log(err)
		}
	})
	t.Logf("replicas: replica A ready in %s", time.Since(begin).Round(10*time.Millisecond))
	endpoints := []string{a.MCPURL(), b.MCPURL()} // 0: A, 1: B
	const epA, epB = 0, 1

	mk := probePlan{Endpoints: endpoints, Workers: 1, Calls: []probeCall{}}
	for _, d := range []string{"esc", "chain", "rate", "kill"} {
		mk.Calls = append(mk.Calls, probeCall{Endpoint: epA, Tool: "filesystem__create_directory", Args: map[string]string{"path": replicaDir + "/" + d}})
	}
	rep, err := runPlan(ctx, b, mk)
	if err != nil {
		t.Fatal(err)
	}
	requireOK(t, "create directories", rep)

	if !t.Run("approve on B resumes the waiter on A", func(t *testing.T) { approveAcross(t, ctx, a, b, endpoints) }) {
		return
	}
	if !t.Run("one session over both replicas keeps one chain", func(t *testing.T) { chainAcross(t, ctx, a, b, endpoints) }) {
		return
	}
	t.Run("an MCP session opened on one replica is unknown to the other", func(t *testing.T) { foreignSession(t, ctx, b, endpoints) })
	t.Run("audited calls per second, one replica and two", func(t *testing.T) { throughput(t, ctx, b, endpoints) })
	// State shared in Postgres (issue 24 item 10): one loop breaker, one
	// console sign-in, one auto-approver budget.
	t.Run("a loop broken on A is broken on B", func(t *testing.T) { loopAcross(t, ctx, b, endpoints) })
	t.Run("a console sign-in on A works on B", func(t *testing.T) { consoleAcross(t, ctx, a, b) })
	t.Run("one auto-approver budget", func(t *testing.T) { budgetAcross(t, ctx, b) })
	t.Run("replica A killed mid-call", func(t *testing.T) { killReplica(t, ctx, a, b, endpoints) })
}

// approveAcross: a move_file (escalated: its source is a delete-path
// role) runs on A; the operator approves through B; A's waiter resumes.
func approveAcross(t *testing.T, ctx context.Context, a, b *stack.Stack, endpoints []string) {
	const reps = 7
	seed := probePlan{Endpoints: endpoints, Workers: 2}
	for i := range reps {
		seed.Calls = append(seed.Calls, writeCall(i%2, fmt.Sprintf("%s/esc/f-%d.txt", replicaDir, i)))
	}
	rep, err := runPlan(ctx, b, seed)
	if err != nil {
		t.Fatal(err)
	}
	requireOK(t, "seed files", rep)

	var lat []time.Duration
	var seen []string
	for i := range reps {
		src := fmt.Sprintf("%s/esc/f-%d.txt", replicaDir, i)
		plan := probePlan{Endpoints: endpoints, Workers: 1, Calls: []probeCall{{Endpoint: 0, Tool: "filesystem__move_file",
			Args: map[string]string{"source": src, "destination": src + ".moved"}}}}
		type result struct {
			rep probeReport
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := runPlan(ctx, b, plan)
			done <- result{r, err}
		}()
		// B's ops API sees the escalation A opened.
		e, err := b.WaitPending(ctx, replicaSession, "filesystem", "move_file", time.Minute, seen...)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e.ID)
		if !strings.Contains(string(e.Args), fmt.Sprintf("f-%d.txt", i)) {
			t.Fatalf("pending escalation %s is for %s, want f-%d.txt", e.ID, e.Args, i)
		}
		// Its resource names both paths (the console's RESOURCE column).
		for _, want := range []string{fmt.Sprintf(`source (read-path+delete-path): %q`, src), fmt.Sprintf(`destination (write-path): %q`, src+".moved")} {
			if !strings.Contains(e.Resource, want) {
				t.Errorf("escalation %s resource %q lacks %q", e.ID, e.Resource, want)
			}
		}
		approved := time.Now()
		d, err := b.Decide(ctx, e.ID, true, "e2e operator approves on replica B", "")
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != "approved" {
			t.Fatalf("approving %s on B answered %+v", e.ID, d)
		}
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		requireOK(t, "move_file after approval", res.rep)
		l := time.Duration(res.rep.Calls[0].End - approved.UnixNano())
		lat = append(lat, l)
		if ok, err := b.WorkspaceExists(ctx, strings.TrimPrefix(src, "/workspace")+".moved"); err != nil || !ok {
			t.Fatalf("%s.moved does not exist after the approved move (%v)", src, err)
		}
	}
	slices.Sort(lat)
	p50 := lat[len(lat)/2]
	t.Logf("replicas: approve on B → A's call answered: p50 %s, min %s, max %s over %d (all %v)",
		p50.Round(100*time.Microsecond), lat[0].Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond), reps, lat)
	// The waiter's safety re-check polls every escalation.poll_interval
	// (1 s in the suite): a p50 under 50 ms is NOTIFY crossing replicas.
	if p50 > 50*time.Millisecond {
		t.Errorf("approve → resume across replicas p50 %s, want <= 50ms", p50)
	}
}

var chainFile = regexp.MustCompile(`/replicas/chain/([ab])-(\d+)\.txt`)

// chainAcross: calls alternate between the replicas, concurrently; the
// session's records form one chain that both replicas verify.
func chainAcross(t *testing.T, ctx context.Context, a, b *stack.Stack, endpoints []string) {
	const n = 60
	plan := probePlan{Endpoints: endpoints, Workers: 4}
	for i := range n {
		plan.Calls = append(plan.Calls, writeCall(i%2, fmt.Sprintf("%s/chain/%s-%d.txt", replicaDir, "ab"[i%2:i%2+1], i)))
	}
	rep, err := runPlan(ctx, b, plan)
	if err != nil {
		t.Fatal(err)
	}
	requireOK(t, "alternating writes", rep)

	var rows []struct {
		Seq  int64  `json:"seq"`
		Args string `json:"args"`
	}
	if err := b.QueryJSON(ctx, `SELECT seq, args FROM tool_calls WHERE session_id = `+stack.Quote(replicaSession)+
		` AND tool = 'write_file' AND args LIKE '%/replicas/chain/%' ORDER BY seq`, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("%d decision rows for the %d writes", len(rows), n)
	}
	var order strings.Builder
	switches, per := 0, map[string]int{}
	for i, r := range rows {
		m := chainFile.FindStringSubmatch(r.Args)
		if m == nil {
			t.Fatalf("row #%d args %s", r.Seq, r.Args)
		}
		per[m[1]]++
		order.WriteString(m[1])
		if i > 0 && order.String()[i-1] != m[1][0] {
			switches++
		}
	}
	t.Logf("replicas: %d writes in chain order by replica: %s (%d switches)", n, order.String(), switches)
	if per["a"] != n/2 || per["b"] != n/2 || switches < 4 {
		t.Fatalf("rows by replica %v with %d switches: the chain does not interleave both replicas", per, switches)
	}
	// One linear chain: seq 1..max with no gap or repeat over every
	// audit table of the session (audit verify checks the hashes).
	waitOutcomes(t, ctx, b, "/replicas/chain/")
	verifyChain(t, ctx, a, replicaSession, int64(2*n))
	verifyChain(t, ctx, b, replicaSession, int64(2*n))
}

// waitOutcomes waits until every decision of the session whose args
// contain like has its outcome row (outcomes may be written after the
// call answered).
func waitOutcomes(t *testing.T, ctx context.Context, s *stack.Stack, like string) {
	t.Helper()
	q := `SELECT count(*) FROM tool_calls c WHERE c.session_id = ` + stack.Quote(replicaSession) + ` AND c.args LIKE ` + stack.Quote("%"+like+"%") +
		` AND NOT EXISTS (SELECT 1 FROM tool_call_outcomes o WHERE o.call_id = c.call_id)`
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := s.SQL(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if n == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s decisions under %s still without an outcome after 20 s", n, like)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// throughputCase is one way of sending a burst: per session, the
// endpoint of each call (nil: alternate A and B).
type throughputCase struct {
	name  string
	loads []sessionLoad
}

type sessionLoad struct {
	session string
	ep      int // 0: A, 1: B, -1: alternate
	workers int
}

// throughput measures audited calls per second through one replica and
// through two: one session (alternating A and B, every call extending the
// same chain) and two sessions (one per replica, or both on B). The cases
// run interleaved, three rounds; the median is reported.
func throughput(t *testing.T, ctx context.Context, b *stack.Stack, endpoints []string) {
	const n = 240 // calls per burst, over all its sessions
	cases := []throughputCase{
		{name: "1 session, 1 replica (B)", loads: []sessionLoad{{replicaSession, 1, 8}}},
		{name: "1 session, 2 replicas (alternating)", loads: []sessionLoad{{replicaSession, -1, 8}}},
		{name: "2 sessions, 1 replica (B)", loads: []sessionLoad{{replicaSession, 1, 4}, {replicaSession2, 1, 4}}},
		{name: "2 sessions, 2 replicas (one each)", loads: []sessionLoad{{replicaSession, 0, 4}, {replicaSession2, 1, 4}}},
	}
	rates := make([][]float64, len(cases))
	for round := range 3 {
		for ci, tc := range cases {
			type result struct {
				rep probeReport
				err error
			}
			out := make(chan result, len(tc.loads))
			for li, l := range tc.loads {
				plan := probePlan{Endpoints: endpoints, Workers: l.workers}
				for i := range n / len(tc.loads) {
					ep := l.ep
					if ep < 0 {
						ep = i % 2
					}
					plan.Calls = append(plan.Calls, writeCall(ep, fmt.Sprintf("%s/rate/c%d-r%d-s%d-%d.txt", replicaDir, ci, round, li, i)))
				}
				go func() {
					r, err := runPlanAs(ctx, b, l.session, plan)
					out <- result{r, err}
				}()
			}
			var first, last int64
			for range tc.loads {
				r := <-out
				if r.err != nil {
					t.Fatal(r.err)
				}
				requireOK(t, tc.name, r.rep)
				if first == 0 || r.rep.Start < first {
					first = r.rep.Start
				}
				last = max(last, r.rep.End)
			}
			rates[ci] = append(rates[ci], float64(n/len(tc.loads)*len(tc.loads))/(float64(last-first)/1e9))
		}
	}
	median := func(r []float64) float64 { r = slices.Clone(r); slices.Sort(r); return r[len(r)/2] }
	for ci, tc := range cases {
		t.Logf("replicas: audited write_file calls per second, %s: %.0f (median of %.0f; %d calls, 8 workers)", tc.name, median(rates[ci]), rates[ci], n)
	}
	t.Logf("replicas: two replicas / one: %.2fx with one session, %.2fx with two sessions",
		median(rates[1])/median(rates[0]), median(rates[3])/median(rates[2]))
}

// foreignSession: a client that moves to the other replica with its MCP
// session id (no new initialize) is refused there (404, as for any
// unknown session) and nothing runs or is recorded.
func foreignSession(t *testing.T, ctx context.Context, b *stack.Stack, endpoints []string) {
	plan := probePlan{Endpoints: endpoints, Workers: 1, SwapSessions: true, Calls: []probeCall{
		writeCall(0, replicaDir+"/chain/foreign-a.txt"), writeCall(1, replicaDir+"/chain/foreign-b.txt"),
	}}
	rep, err := runPlan(ctx, b, plan)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range rep.Calls {
		if !strings.Contains(c.Err, "HTTP 404") {
			t.Errorf("call %d with the other replica's MCP session id: %+v, want HTTP 404", i, c)
		}
	}
	n, err := b.SQL(ctx, `SELECT count(*) FROM tool_calls WHERE args LIKE '%/replicas/chain/foreign-%'`)
	if err != nil {
		t.Fatal(err)
	}
	if n != "0" {
		t.Errorf("%s tool_calls rows for calls under a foreign MCP session id", n)
	}
	for _, f := range []string{"foreign-a.txt", "foreign-b.txt"} {
		if ok, err := b.WorkspaceExists(ctx, "/replicas/chain/"+f); err != nil || ok {
			t.Errorf("%s written under a foreign MCP session id (%v)", f, err)
		}
	}
}

var killFile = regexp.MustCompile(`/replicas/kill/([ab]-\d+\.txt)`)

// killReplica kills A (SIGKILL) during a burst on it and while a call
// waits there for an escalation.
func killReplica(t *testing.T, ctx context.Context, a, b *stack.Stack, endpoints []string) {
	// A file whose move will wait for a human on A.
	rep, err := runPlan(ctx, b, probePlan{Endpoints: endpoints, Workers: 1, Calls: []probeCall{writeCall(1, replicaDir+"/kill/victim.txt")}})
	if err != nil {
		t.Fatal(err)
	}
	requireOK(t, "victim file", rep)
	type result struct {
		rep probeReport
		err error
	}
	waiting := make(chan result, 1)
	go func() {
		r, err := runPlan(ctx, b, probePlan{Endpoints: endpoints, Workers: 1, TimeoutSec: 60, Calls: []probeCall{{Endpoint: 0, Tool: "filesystem__move_file",
			Args: map[string]string{"source": replicaDir + "/kill/victim.txt", "destination": replicaDir + "/kill/victim.moved"}}}})
		waiting <- result{r, err}
	}()
	pending, err := b.WaitPending(ctx, replicaSession, "filesystem", "move_file", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	const n = 400
	burst := probePlan{Endpoints: endpoints, Workers: 4, TimeoutSec: 30, SkipAfterError: true}
	for i := range n {
		burst.Calls = append(burst.Calls, writeCall(0, fmt.Sprintf("%s/kill/a-%d.txt", replicaDir, i)))
	}
	burstDone := make(chan result, 1)
	go func() {
		r, err := runPlan(ctx, b, burst)
		burstDone <- result{r, err}
	}()
	// Kill A once the burst is well under way.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := b.SQL(ctx, `SELECT count(*) FROM tool_calls WHERE session_id = `+stack.Quote(replicaSession)+` AND args LIKE '%/replicas/kill/a-%'`)
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := strconv.Atoi(c); k >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.KillGateway(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// B serves the session right away.
	after := probePlan{Endpoints: endpoints[1:], Workers: 1}
	for i := range 5 {
		after.Calls = append(after.Calls, writeCall(0, fmt.Sprintf("%s/kill/b-%d.txt", replicaDir, i)))
	}
	rep, err = runPlan(ctx, b, after)
	if err != nil {
		t.Fatal(err)
	}
	requireOK(t, "calls through B after A was killed", rep)
	t.Logf("replicas: first call through B answered %s after A was killed (including the probe's docker exec and MCP initialize)",
		time.Duration(rep.Calls[0].End-killed.UnixNano()).Round(time.Millisecond))

	br := <-burstDone
	if br.err != nil {
		t.Fatal(br.err)
	}
	answered, failed, skipped := 0, 0, 0
	for _, c := range br.rep.Calls {
		switch {
		case c.Err == "" && !c.IsError:
			answered++
		case strings.HasPrefix(c.Err, "skipped"):
			skipped++
		default:
			failed++
		}
	}
	t.Logf("replicas: burst on A: %d answered, %d broke when A was killed, %d not sent", answered, failed, skipped)
	if failed == 0 || answered == 0 {
		t.Errorf("the kill did not land mid-burst (%d answered, %d broke)", answered, failed)
	}
	wr := <-waiting
	if wr.err != nil {
		t.Fatal(wr.err)
	}
	if c := wr.rep.Calls[0]; c.Err == "" && !c.IsError {
		t.Errorf("the call waiting on A for escalation %s was answered as a success: %s", pending.ID, c.Text)
	}

	// Nothing ran unaudited: every file the burst wrote has its allow
	// decision row; an ok outcome means the file exists.
	var rows []struct {
		Args     string `json:"args"`
		Decision string `json:"decision"`
		Outcome  string `json:"outcome"`
	}
	if err := b.QueryJSON(ctx, `SELECT c.args, c.decision, coalesce(o.status, '') AS outcome
		FROM tool_calls c LEFT JOIN tool_call_outcomes o USING (call_id)
		WHERE c.session_id = `+stack.Quote(replicaSession)+` AND c.args LIKE '%/replicas/kill/%'`, &rows); err != nil {
		t.Fatal(err)
	}
	allowed, okOutcome := map[string]bool{}, map[string]bool{}
	statuses := map[string]int{}
	for _, r := range rows {
		statuses[r.Decision+"/"+r.Outcome]++
		m := killFile.FindStringSubmatch(r.Args)
		if m == nil {
			continue
		}
		if r.Decision == "allow" {
			allowed[m[1]] = true
		}
		if r.Outcome == "ok" {
			okOutcome[m[1]] = true
		}
	}
	t.Logf("replicas: kill scenario decisions/outcomes %v", statuses)
	paths, err := b.GatewayPaths(ctx, replicaDir+"/kill")
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, p := range paths {
		name := p[strings.LastIndex(p, "/")+1:]
		exists[name] = true
		if killFile.MatchString("/replicas/kill/"+name) && !allowed[name] {
			t.Errorf("%s exists but has no allow decision row: it ran unaudited", p)
		}
	}
	for name := range okOutcome {
		if !exists[name] {
			t.Errorf("%s has an ok outcome but does not exist", name)
		}
	}
	if exists["victim.moved"] || !exists["victim.txt"] {
		t.Errorf("the move waiting on A ran although nobody approved it (files %v)", paths)
	}
	t.Logf("replicas: %d files of the kill scenario, each with its allow decision; %d allow decisions without an outcome (in flight on A)",
		len(exists), statuses["allow/"])

	// The escalation A's dead call waited on is still the operator's to
	// decide; deny it through B. The chain of the session verifies.
	if e, err := b.Escalation(ctx, pending.ID); err != nil || e.Status != "pending" {
		t.Errorf("escalation %s after A was killed: %+v (%v), want pending", pending.ID, e, err)
	}
	if _, err := b.Decide(ctx, pending.ID, false, "e2e: the replica that waited is gone", ""); err != nil {
		t.Error(err)
	}
	verifyChain(t, ctx, b, replicaSession, 1)
}
