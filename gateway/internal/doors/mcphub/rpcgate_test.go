package mcphub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/strictjson"
)

var testLimits = withAdmissionDefaults(Config{}).JSONLimits

func TestCheckRPC(t *testing.T) {
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":` + params + `}`
	}
	wide := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strconv.Itoa(i) + `":1`)
		}
		return b.String()
	}
	tests := []struct {
		name   string
		body   string
		reason string // "" accepted
	}{
		{name: "initialize", body: initBody},
		{name: "tools/call", body: call(`{"name":"files__read","arguments":{"path":"/a"},"_meta":{"progressToken":1}}`)},
		{name: "tools/call no arguments", body: call(`{"name":"files__read"}`)},
		{name: "arguments array (the hub records it)", body: call(`{"name":"files__read","arguments":[1]}`)},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{name: "tools/list", body: `{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{"cursor":"c"}}`},
		{name: "ping response", body: `{"jsonrpc":"2.0","id":9,"result":{}}`},
		{name: "unknown method: shape only", body: `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"Cursor":1}}`},

		{name: "duplicate method", body: `{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{"name":"files__read"}}`, reason: refusedJSON},
		{name: "case variant Method", body: `{"jsonrpc":"2.0","id":2,"method":"tools/list","Method":"tools/call","params":{"name":"files__read"}}`, reason: refusedNames},
		{name: "only Method", body: `{"jsonrpc":"2.0","id":2,"Method":"tools/call","params":{"name":"files__read"}}`, reason: refusedNames},
		{name: "case variant Params", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","Params":{"name":"files__read"}}`, reason: refusedNames},
		{name: "duplicate params", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read"},"params":{"name":"files__delete"}}`, reason: refusedJSON},
		{name: "escaped duplicate", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read","n\u0061me":"files__delete"}}`, reason: refusedJSON},
		{name: "duplicate name", body: call(`{"name":"files__read","name":"files__delete"}`), reason: refusedJSON},
		{name: "case variant Name", body: call(`{"name":"files__read","Name":"files__delete"}`), reason: refusedParams},
		{name: "Kelvin sign name", body: call(`{"name":"files__read","\u212aey":1}`), reason: refusedParams},
		{name: "case variant Arguments", body: call(`{"name":"files__read","arguments":{"path":"/a"},"Arguments":{"path":"/etc/shadow"}}`), reason: refusedParams},
		{name: "long s arguments", body: call(`{"name":"files__read","arguments":{"path":"/a"},"argumentſ":{"path":"/etc/shadow"}}`), reason: refusedParams},
		{name: "duplicate arguments", body: call(`{"name":"files__read","arguments":{"path":"/a"},"arguments":{"path":"/etc/shadow"}}`), reason: refusedJSON},
		{name: "duplicate inside arguments", body: call(`{"name":"files__read","arguments":{"path":"/a","path":"/etc/shadow"}}`), reason: refusedJSON},
		{name: "duplicate deep inside arguments", body: call(`{"name":"files__read","arguments":{"edits":[{"old":"a","old":"b"}]}}`), reason: refusedJSON},
		{name: "duplicate in _meta", body: call(`{"name":"files__read","_meta":{"progressToken":1,"progressToken":2}}`), reason: refusedJSON},
		{name: "task (not served)", body: call(`{"name":"files__read","task":{}}`), reason: refusedParams},
		{name: "initialize extension name", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"},"x-vendor":{}}}`},
		{name: "tools/list long s variant", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"curſor":"c"}}`, reason: refusedParams},
		{name: "initialize case variant", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","ProtocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, reason: refusedParams},
		{name: "batch", body: `[` + initBody + `]`, reason: refusedBatch},
		{name: "batch after space", body: " \n[" + initBody + `]`, reason: refusedBatch},
		{name: "trailing data", body: initBody + `{}`, reason: refusedJSON},
		{name: "invalid UTF-8", body: call("{\"name\":\"files__read\",\"arguments\":{\"p\":\"\xff\"}}"), reason: refusedJSON},
		{name: "jsonrpc 1.0", body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, reason: refusedNames},
		{name: "method not a string", body: `{"jsonrpc":"2.0","id":1,"method":7}`, reason: refusedNames},
		{name: "too many members", body: call(`{"name":"files__read","arguments":{"x":{` + wide(DefaultJSONMaxMembers+1) + `}}}`), reason: refusedShape},
		{name: "members at the bound", body: call(`{"name":"files__read","arguments":{"x":{` + wide(DefaultJSONMaxMembers-8) + `}}}`)},
		{name: "too deep", body: call(`{"name":"files__read","arguments":{"x":` + strings.Repeat("[", DefaultJSONMaxDepth) + strings.Repeat("]", DefaultJSONMaxDepth) + `}}`), reason: refusedShape},
		{name: "too many elements", body: call(`{"name":"files__read","arguments":{"x":[` + strings.Repeat("1,", DefaultJSONMaxElements) + `1]}}`), reason: refusedShape},
		{name: "not JSON", body: `{"jsonrpc":`, reason: refusedJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, gerr := checkRPC([]byte(tt.body), testLimits)
			got := ""
			if gerr != nil {
				got = gerr.Reason
				if gerr.Msg == "" || len(gerr.Msg) > 1000 {
					t.Errorf("message %q", gerr.Msg)
				}
			}
			if got != tt.reason {
				t.Fatalf("reason = %q, want %q (%v)", got, tt.reason, gerr)
			}
		})
	}
}

// TestCaseVariantArgumentsNeverRun is the regression test of issue 24
// item 1 over HTTP: mcp-go (encoding/json, case-insensitive, last wins)
// would run the tool with "Arguments" while an exact reader judged
// "arguments". The request is refused before mcp-go reads it; the server
// is never called.
func TestCaseVariantArgumentsNeverRun(t *testing.T) {
	f := newHTTPFixture(t, Config{})
	f.pol.evals["files__read"] = allow("r", nil)
	var ran []map[string]any
	f.srv.run = func(_ context.Context, _ string, args map[string]any) (servers.Result, error) {
		ran = append(ran, args)
		return servers.Text("ok"), nil
	}
	resp, _ := rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	bodies := []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read","arguments":{"path":"/ok"},"Arguments":{"path":"/etc/shadow"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files__read","arguments":{"path":"/ok","path":"/etc/shadow"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{},"METHOD":"tools/call","PARAMS":{"name":"files__read","arguments":{"path":"/etc/shadow"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"files__read","arguments":{"path":"/ok"},"argumentſ":{"path":"/etc/shadow"}}}`,
	}
	for _, b := range bodies {
		resp, out := rawPost(t, f.url, "Bearer "+tokenA, sid, b)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, "refused") {
			t.Errorf("%s: status %d %s", b, resp.StatusCode, out)
		}
	}
	if len(ran) != 0 {
		t.Fatalf("the server ran with %v", ran)
	}
	var n float64
	for _, r := range []string{refusedJSON, refusedNames, refusedParams} {
		n += testutil.ToFloat64(counter(t, f.reg, "ironcurtain_mcp_refused_requests_total", map[string]string{"reason": r}))
	}
	if n != float64(len(bodies)) {
		t.Errorf("refusals counted %v, want %d", n, len(bodies))
	}
	// The exact request still runs.
	resp, out := rawPost(t, f.url, "Bearer "+tokenA, sid, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"files__read","arguments":{"path":"/ok"}}}`)
	if resp.StatusCode != http.StatusOK || len(ran) != 1 {
		t.Fatalf("exact call: %d %s %v", resp.StatusCode, out, ran)
	}
	if reqs := f.pol.requests; len(reqs) != 1 || reqs[0].Args["path"] != "/ok" {
		t.Fatalf("policy judged %+v", reqs)
	}
}

// FuzzRPCGateDifferential: whatever the gate lets through, mcp-go's
// encoding/json reading and an exact, duplicate-refusing reading agree on
// the method, the tool name and the arguments.
func FuzzRPCGateDifferential(f *testing.F) {
	for _, s := range []string{
		initBody,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read","arguments":{"path":"/a"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","arguments":{"p":1},"Arguments":{"p":2}}}`,
		`{"jsonrpc":"2.0","id":2,"Method":"tools/call","method":"ping","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","arguments":{"p":1,"P":2,"p":3}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"nam\u0065":"a","arguments":{"\u212a":1}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","argumentſ":{}}}`,
	} {
		f.Add([]byte(s))
	}
	lim := strictjson.Limits{MaxBytes: 1 << 16, MaxDepth: 16, MaxMembers: 256, MaxElements: 256, MaxString: 1 << 12}
	f.Fuzz(func(t *testing.T, body []byte) {
		method, gerr := checkRPC(body, lim)
		if gerr != nil {
			return
		}
		// mcp-go's reading (request_handler.go, CallToolParams.UnmarshalJSON).
		var base struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(body, &base); err != nil {
			return // mcp-go answers a parse error; nothing runs
		}
		if base.Method != method {
			t.Fatalf("method: gate %q, encoding/json %q", method, base.Method)
		}
		if method != "tools/call" || len(base.Params) == 0 || string(base.Params) == "null" {
			return
		}
		var theirs mcp.CallToolParams
		if err := json.Unmarshal(base.Params, &theirs); err != nil {
			return
		}
		// The exact reading.
		var exact struct {
			Name      string `json:"name"`
			Arguments any    `json:"arguments"`
			Meta      any    `json:"_meta"`
		}
		if err := jsonv2.Unmarshal(base.Params, &exact, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false)); err != nil {
			t.Fatalf("the gate let through params an exact reader refuses: %v: %s", err, base.Params)
		}
		if theirs.Name != exact.Name {
			t.Fatalf("name: mcp-go %q, exact %q", theirs.Name, exact.Name)
		}
		if !reflect.DeepEqual(normalise(theirs.Arguments), normalise(exact.Arguments)) {
			t.Fatalf("arguments: mcp-go %#v, exact %#v", theirs.Arguments, exact.Arguments)
		}
	})
}

// normalise maps JSON numbers of both decoders to float64 for comparison.
func normalise(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// TestWideBodyRefusedWhileRead: a body past the member bound is refused
// once those bytes arrive; the gateway does not read the rest (issue 24
// item 12: the 300,000-key call cost 1.4 s and 123 MB before its refusal).
func TestWideBodyRefusedWhileRead(t *testing.T) {
	f := newHTTPFixture(t, Config{RefusalDelay: time.Millisecond})
	resp, _ := rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	pr, pw := io.Pipe()
	var written atomic.Int64
	go func() {
		w := func(s string) bool {
			n, err := io.WriteString(pw, s)
			written.Add(int64(n))
			return err == nil
		}
		if !w(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read","arguments":{"x":{`) {
			return
		}
		for i := 0; w(`"k` + strconv.Itoa(i) + `":1,`); i++ {
		}
	}()
	req, _ := http.NewRequest(http.MethodPost, f.url, pr)
	req.ContentLength = 3 << 20 // within MaxRequestBytes: only the shape refuses it
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := http.DefaultClient.Do(req)
	// The gateway closes the connection without reading the rest: the
	// client may see the answer, or a reset while it still writes.
	if err == nil {
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "more than 4096 object members") {
			t.Fatalf("%d %s", res.StatusCode, out)
		}
	}
	pw.CloseWithError(errors.New("done"))
	waitFor(t, "the shape refusal is counted", func() bool {
		return testutil.ToFloat64(counter(t, f.reg, "ironcurtain_mcp_refused_requests_total", map[string]string{"reason": refusedShape})) == 1
	})
	if n := written.Load(); n > 1<<20 {
		t.Fatalf("the client wrote %d bytes before the refusal", n)
	}
	if f.srv.callCount() != 0 || len(f.sink.all()) != 0 {
		t.Fatal("the refused body reached the pipeline")
	}
}

// TestRefusalDelayHoldsTheSessionsSlot: a refused body's answer waits
// RefusalDelay in its session's slot; another agent is not delayed.
func TestRefusalDelayHoldsTheSessionsSlot(t *testing.T) {
	const delay = 300 * time.Millisecond
	f := newHTTPFixture(t, Config{RefusalDelay: delay, MaxCallsInFlight: 1})
	f.pol.evals["files__read"] = allow("r", nil)
	resp, _ := rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	sidA := resp.Header.Get("Mcp-Session-Id")
	resp, _ = rawPost(t, f.url, "Bearer "+tokenB, "", initBody)
	sidB := resp.Header.Get("Mcp-Session-Id")
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files__read","arguments":{}}}`
	start := time.Now()
	refused := make(chan time.Duration, 1)
	go func() {
		rawPost(t, f.url, "Bearer "+tokenA, sidA, `{"jsonrpc":"2.0","id":2,"Method":"tools/call"}`)
		refused <- time.Since(start)
	}()
	waitFor(t, "the refusal holds A's slot", func() bool { n, _ := f.hub.inflight.inFlight("agent-a"); return n == 1 })
	t0 := time.Now()
	if resp, body := rawPost(t, f.url, "Bearer "+tokenB, sidB, call); resp.StatusCode != http.StatusOK {
		t.Fatalf("B: %d %s", resp.StatusCode, body)
	}
	if d := time.Since(t0); d > delay/2 {
		t.Errorf("agent B waited %s behind A's refusal", d)
	}
	if resp, body := rawPost(t, f.url, "Bearer "+tokenA, sidA, call); resp.StatusCode != http.StatusOK {
		t.Fatalf("A: %d %s", resp.StatusCode, body)
	}
	if d := <-refused; d < delay {
		t.Errorf("the refusal was answered after %s, want at least %s", d, delay)
	}
	if d := time.Since(start); d < delay {
		t.Errorf("A's next call ran %s after its refused one, want at least %s", d, delay)
	}
}

// BenchmarkRPCGate is the strict read every POST to /mcp pays: a small
// tools/call, and one with a 1 MB string argument (a file's content).
func BenchmarkRPCGate(b *testing.B) {
	small := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"filesystem__read_text_file","arguments":{"path":"/work/notes.txt","head":20},"_meta":{"progressToken":7}}}`)
	big := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"filesystem__write_file","arguments":{"path":"/work/a.txt","content":"` + strings.Repeat("abcdefgh", 1<<17) + `"}}}`)
	for _, bc := range []struct {
		name string
		body []byte
	}{{"small", small}, {"1MB", big}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				body, err := strictjson.ReadChecked(bytes.NewReader(bc.body), testLimits)
				if err != nil {
					b.Fatal(err)
				}
				if _, gerr := checkMessage(body); gerr != nil {
					b.Fatal(gerr)
				}
			}
		})
	}
}
