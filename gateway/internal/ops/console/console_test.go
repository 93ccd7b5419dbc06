package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// client is a signed-in browser against the console handler.
type client struct {
	t      testing.TB
	h      http.Handler
	cookie *http.Cookie
	csrf   string
}

func (w *world) signIn(t testing.TB) *client {
	t.Helper()
	cl := &client{t: t, h: w.c.Handler()}
	res := cl.post("/ui/signin", url.Values{"token": {operatorToken}}, "")
	if res.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: status %d: %s", res.Code, res.Body.String())
	}
	for _, ck := range res.Result().Cookies() {
		if strings.HasSuffix(ck.Name, cookieName) {
			cl.cookie = ck
		}
	}
	if cl.cookie == nil {
		t.Fatal("sign-in set no cookie")
	}
	body := cl.get("/ui/escalations").Body.String()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the escalations page")
	}
	cl.csrf = m[1]
	return cl
}

func (cl *client) do(req *http.Request) *httptest.ResponseRecorder {
	if cl.cookie != nil {
		req.AddCookie(cl.cookie)
	}
	rec := httptest.NewRecorder()
	cl.h.ServeHTTP(rec, req)
	return rec
}

func (cl *client) get(path string) *httptest.ResponseRecorder {
	return cl.do(httptest.NewRequest(http.MethodGet, "http://ops.test"+path, nil))
}

// post sends a same-origin form post as a browser would (origin "" = the
// console's own).
func (cl *client) post(path string, form url.Values, origin string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "http://ops.test"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin == "" {
		origin = "http://ops.test"
	}
	req.Header.Set("Origin", origin)
	return cl.do(req)
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	w := newWorld(t, "x")
	cl := w.signIn(t)
	anon := &client{t: t, h: w.c.Handler()}
	for _, res := range []*httptest.ResponseRecorder{
		anon.get("/ui/signin"), anon.get("/ui/escalations"), anon.get("/ui/nope"), anon.get("/ui/assets/live.js"),
		cl.get("/ui/escalations"), cl.get("/ui/sessions"), cl.get("/ui/timeline?session=s1"), cl.get("/ui/policy"),
		cl.get("/ui/escalation?id=esc-1"), cl.get("/ui/nope"), cl.post("/ui/escalation/decide", url.Values{}, ""),
	} {
		h := res.Header()
		if got := h.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("CSP = %q", got)
		}
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if h.Get(k) != v {
				t.Errorf("%s = %q, want %q", k, h.Get(k), v)
			}
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe") {
		t.Error("CSP allows something unsafe")
	}
}

func TestSignIn(t *testing.T) {
	w := newWorld(t, "x")
	anon := &client{t: t, h: w.c.Handler()}
	for _, tc := range []struct {
		name   string
		form   url.Values
		origin string
		want   int
	}{
		{name: "wrong token", form: url.Values{"token": {"not-the-operator-token-at-all"}}, want: http.StatusUnauthorized},
		{name: "empty token", form: url.Values{"token": {""}}, want: http.StatusUnauthorized},
		{name: "no token", form: url.Values{}, want: http.StatusUnauthorized},
		{name: "cross-site sign-in", form: url.Values{"token": {operatorToken}}, origin: "https://evil.example", want: http.StatusForbidden},
		{name: "null origin without fetch metadata", form: url.Values{"token": {operatorToken}}, origin: "null", want: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := anon.post("/ui/signin", tc.form, tc.origin)
			if res.Code != tc.want {
				t.Fatalf("status %d, want %d", res.Code, tc.want)
			}
			if len(res.Result().Cookies()) != 0 {
				t.Fatal("a refused sign-in set a cookie")
			}
		})
	}
	if res := anon.get("/ui/escalations"); res.Code != http.StatusSeeOther || res.Header().Get("Location") != "/ui/signin" {
		t.Fatalf("unsigned page: %d %q", res.Code, res.Header().Get("Location"))
	}
	if res := anon.get("/ui/events"); res.Code != http.StatusUnauthorized {
		t.Fatalf("unsigned event stream: %d", res.Code)
	}
	if res := anon.get("/ui/escalations/pending"); res.Code != http.StatusUnauthorized {
		t.Fatalf("unsigned fragment: %d", res.Code)
	}
	// A made-up cookie is no session.
	forged := &client{t: t, h: w.c.Handler(), cookie: &http.Cookie{Name: cookieName, Value: randomToken()}}
	if res := forged.get("/ui/escalations"); res.Code != http.StatusSeeOther {
		t.Fatalf("forged cookie: %d", res.Code)
	}
}

func TestCookieFlags(t *testing.T) {
	for _, secure := range []bool{false, true} {
		w := newWorld(t, "x")
		w.c.deps.Secure = secure
		cl := w.signIn(t)
		ck := cl.cookie
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.MaxAge <= 0 || ck.MaxAge > int(SessionMax/time.Second) {
			t.Errorf("secure=%v: cookie %+v", secure, ck)
		}
		if ck.Secure != secure {
			t.Errorf("secure=%v: cookie Secure = %v", secure, ck.Secure)
		}
		if secure && ck.Name != "__Host-"+cookieName {
			t.Errorf("TLS cookie name %q lacks the __Host- prefix", ck.Name)
		}
		if len(ck.Value) < 40 {
			t.Errorf("session id %q is short", ck.Value)
		}
		// Sign-out ends the session on the server, not only in the browser.
		res := cl.post("/ui/signout", url.Values{"csrf": {cl.csrf}}, "")
		if res.Code != http.StatusSeeOther {
			t.Fatalf("sign-out: %d", res.Code)
		}
		if res := cl.get("/ui/escalations"); res.Code != http.StatusSeeOther {
			t.Fatalf("after sign-out the old cookie still works: %d", res.Code)
		}
	}
}

func TestSessionExpiry(t *testing.T) {
	w := newWorld(t, "x")
	now := t0
	w.c.now = func() time.Time { return now }
	w.c.sessions.now = w.c.now
	cl := w.signIn(t)
	now = now.Add(SessionIdle - time.Minute)
	if res := cl.get("/ui/escalations"); res.Code != http.StatusOK {
		t.Fatalf("within the idle bound: %d", res.Code)
	}
	now = now.Add(SessionIdle + time.Second)
	if res := cl.get("/ui/escalations"); res.Code != http.StatusSeeOther {
		t.Fatalf("idle session still works: %d", res.Code)
	}
	cl = w.signIn(t)
	for end := now.Add(SessionMax); now.Before(end); now = now.Add(SessionIdle / 2) {
		if res := cl.get("/ui/escalations"); res.Code != http.StatusOK {
			t.Fatalf("active session ended early at %s: %d", now.Sub(end), res.Code)
		}
	}
	now = now.Add(time.Second)
	if res := cl.get("/ui/escalations"); res.Code != http.StatusSeeOther {
		t.Fatalf("session past its maximum age still works: %d", res.Code)
	}
}

func TestCSRF(t *testing.T) {
	decide := func(csrf string) url.Values {
		v := url.Values{"id": {"esc-1"}, "action": {"approve"}, "reason": {"ok"}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		csrf    func(*client) string
		origin  string
		fetch   string
		want    int
		decided bool
	}{
		{name: "no token", csrf: func(*client) string { return "" }, want: http.StatusForbidden},
		{name: "wrong token", csrf: func(*client) string { return randomToken() }, want: http.StatusForbidden},
		{name: "cross-site origin", csrf: func(c *client) string { return c.csrf }, origin: "https://evil.example", want: http.StatusForbidden},
		{name: "cross-site fetch metadata", csrf: func(c *client) string { return c.csrf }, fetch: "cross-site", want: http.StatusForbidden},
		{name: "same-site sibling", csrf: func(c *client) string { return c.csrf }, fetch: "same-site", want: http.StatusForbidden},
		{name: "same origin with token", csrf: func(c *client) string { return c.csrf }, fetch: "same-origin", want: http.StatusSeeOther, decided: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "x")
			cl := w.signIn(t)
			req := httptest.NewRequest(http.MethodPost, "http://ops.test/ui/escalation/decide", strings.NewReader(decide(tc.csrf(cl)).Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			origin := tc.origin
			if origin == "" {
				origin = "http://ops.test"
			}
			req.Header.Set("Origin", origin)
			if tc.fetch != "" {
				req.Header.Set("Sec-Fetch-Site", tc.fetch)
			}
			res := cl.do(req)
			if res.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", res.Code, tc.want, res.Body.String())
			}
			if got := len(w.esc.decided) == 1; got != tc.decided {
				t.Fatalf("decided = %v, want %v", got, tc.decided)
			}
			if tc.decided && (w.esc.decided[0].By != "alice" || !w.esc.decided[0].Approve) {
				t.Fatalf("decision %+v", w.esc.decided[0])
			}
		})
	}
	// Every state-changing route needs the token.
	w := newWorld(t, "x")
	cl := w.signIn(t)
	for _, p := range []string{"/ui/escalation/decide", "/ui/sessions/create", "/ui/sessions/revoke", "/ui/timeline/verify", "/ui/signout"} {
		if res := cl.post(p, url.Values{"id": {"s1"}, "session": {"s1"}, "name": {"n"}}, ""); res.Code != http.StatusForbidden {
			t.Errorf("%s without CSRF token: %d", p, res.Code)
		}
	}
	if len(w.admin.minted)+len(w.admin.revoked)+len(w.esc.decided) != 0 {
		t.Fatal("a refused request changed state")
	}
}

func TestDecideApproveSimilar(t *testing.T) {
	w := newWorld(t, "x")
	cl := w.signIn(t)
	page := cl.get("/ui/escalation?id=esc-1").Body.String()
	for _, want := range []string{`value="exact"`, `value="directory"`, "whose resource is inside /w/x"} {
		if !strings.Contains(page, want) {
			t.Errorf("approval page lacks %q", want)
		}
	}
	res := cl.post("/ui/escalation/decide", url.Values{"csrf": {cl.csrf}, "id": {"esc-1"}, "action": {"approve"}, "similar": {"directory"}, "reason": {"fine"}}, "")
	if res.Code != http.StatusSeeOther {
		t.Fatalf("decide: %d %s", res.Code, res.Body.String())
	}
	if d := w.esc.decided[0]; d.Similar != "directory" || d.Reason != "fine" || d.By != "alice" {
		t.Fatalf("decision %+v", d)
	}
	res = cl.post("/ui/escalation/decide", url.Values{"csrf": {cl.csrf}, "id": {"esc-1"}, "action": {"approve"}}, "")
	if res.Code != http.StatusConflict {
		t.Fatalf("second decision: %d", res.Code)
	}
	for _, bad := range []url.Values{
		{"id": {"esc-1"}, "action": {"maybe"}},
		{"id": {"esc 1"}, "action": {"approve"}},
		{"id": {"esc-1"}, "action": {"approve"}, "similar": {"everything"}},
		{"id": {"esc-1"}, "action": {"approve"}, "reason": {strings.Repeat("x", maxReason+1)}},
	} {
		bad.Set("csrf", cl.csrf)
		if res := cl.post("/ui/escalation/decide", bad, ""); res.Code != http.StatusBadRequest {
			t.Errorf("%v: %d", bad, res.Code)
		}
	}
}

func TestMintShowsTokenOnceAndRevoke(t *testing.T) {
	w := newWorld(t, "x")
	cl := w.signIn(t)
	res := cl.post("/ui/sessions/create", url.Values{"csrf": {cl.csrf}, "name": {"run-1"}, "ttl": {"2h"}, "max_tool_calls": {"10"}, "labels": {"team=a\nci=yes"}}, "")
	if res.Code != http.StatusOK || !strings.Contains(res.Body.String(), "icsess_secret_token_shown_once") {
		t.Fatalf("mint: %d", res.Code)
	}
	if res.Header().Get("Cache-Control") != "no-store" {
		t.Fatal("the page with the token may be cached")
	}
	if m := w.admin.minted[0]; m.Name != "run-1" || m.TTL != 2*time.Hour || m.MaxToolCalls != 10 || m.Labels["ci"] != "yes" {
		t.Fatalf("minted %+v", m)
	}
	if strings.Contains(cl.get("/ui/sessions").Body.String(), "icsess_secret") {
		t.Fatal("the token is shown again")
	}
	for _, bad := range []url.Values{{"name": {"n"}, "ttl": {"soon"}}, {"name": {"n"}, "max_tokens": {"-1"}}, {"name": {"n"}, "labels": {"novalue"}}, {"name": {""}}} {
		bad.Set("csrf", cl.csrf)
		if res := cl.post("/ui/sessions/create", bad, ""); res.Code != http.StatusBadRequest {
			t.Errorf("%v: %d", bad, res.Code)
		}
	}
	if res := cl.post("/ui/sessions/revoke", url.Values{"csrf": {cl.csrf}, "id": {"s1"}, "reason": {"done"}}, ""); res.Code != http.StatusSeeOther || w.admin.revoked[0] != "s1" {
		t.Fatalf("revoke: %d %v", res.Code, w.admin.revoked)
	}
}

// TestHostileStringsRenderInert renders every page with agent-written
// values that try to run script, inject markup, smuggle links or reorder
// text, and checks the HTML the browser would parse: no element, attribute,
// link or script came from the agent, and direction-changing characters are
// shown as marks, never sent raw.
func TestHostileStringsRenderInert(t *testing.T) {
	for _, payload := range hostile {
		t.Run(payload, func(t *testing.T) {
			w := newWorld(t, payload)
			cl := w.signIn(t)
			pages := map[string]*httptest.ResponseRecorder{
				"escalations": cl.get("/ui/escalations"),
				"pending":     cl.get("/ui/escalations/pending"),
				"escalation":  cl.get("/ui/escalation?id=esc-1"),
				"sessions":    cl.get("/ui/sessions"),
				"timeline":    cl.get("/ui/timeline?session=s1"),
				"verify":      cl.post("/ui/timeline/verify", url.Values{"csrf": {cl.csrf}, "session": {"s1"}}, ""),
				"policy":      cl.get("/ui/policy"),
			}
			for name, res := range pages {
				if res.Code != http.StatusOK {
					t.Fatalf("%s: status %d: %s", name, res.Code, res.Body.String())
				}
				checkInert(t, name, res.Body.String())
				if strings.Contains(res.Body.String(), "\u202E") || strings.Contains(res.Body.String(), "\u2066") || strings.Contains(res.Body.String(), "\u200B") {
					t.Errorf("%s: a bidi or invisible character is sent raw", name)
				}
			}
			if strings.ContainsRune(payload, '\u202E') && !strings.Contains(pages["escalations"].Body.String(), "⟨U&#43;202E⟩") {
				t.Error("the RTL override is not shown as a mark")
			}
		})
	}
}

// allowed URLs the console itself writes.
var ownURL = regexp.MustCompile(`^/ui/[a-z/.]*(\?[-A-Za-z0-9_=&%.+]*)?$`)

func checkInert(t *testing.T, page, doc string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(doc))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() != io.EOF {
				t.Fatalf("%s: %v", page, z.Err())
			}
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script":
			if len(tok.Attr) != 2 || attr(tok, "src") != "/ui/assets/live.js" {
				t.Errorf("%s: a script element that is not the console's: %v", page, tok)
			}
		case "img", "svg", "iframe", "object", "embed", "base", "meta", "style", "frame", "math", "video", "audio":
			if tok.Data == "meta" && (attr(tok, "charset") != "" || attr(tok, "name") != "") {
				continue
			}
			t.Errorf("%s: unexpected <%s> element: %v", page, tok.Data, tok)
		}
		for _, a := range tok.Attr {
			k := strings.ToLower(a.Key)
			if strings.HasPrefix(k, "on") || k == "style" || k == "srcdoc" || k == "formaction" {
				t.Errorf("%s: attribute %s=%q on <%s>", page, a.Key, a.Val, tok.Data)
			}
			if k == "href" || k == "src" || k == "action" {
				if !ownURL.MatchString(a.Val) {
					t.Errorf("%s: <%s %s=%q> is not a console URL", page, tok.Data, k, a.Val)
				}
			}
		}
	}
}

func attr(tok html.Token, key string) string {
	for _, a := range tok.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// TestMegabyteValuesStayBounded: 1 MB agent values are cut to a preview and a
// bounded "show all"; every page stays within its byte budget.
func TestMegabyteValuesStayBounded(t *testing.T) {
	big := strings.Repeat("<b>A</b>\u202E", (1<<20)/12)
	w := newWorld(t, big)
	cl := w.signIn(t)
	for _, p := range []string{"/ui/escalations", "/ui/escalation?id=esc-1", "/ui/timeline?session=s1", "/ui/sessions", "/ui/policy"} {
		res := cl.get(p)
		if res.Code != http.StatusOK {
			t.Fatalf("%s: %d", p, res.Code)
		}
		n := res.Body.Len()
		// Each value: a 1 KiB preview and a 64 KiB "show all", escaped (up
		// to 6x for "<" → "&lt;" and marks). Pages list a handful.
		if n > 2<<20 {
			t.Errorf("%s: %d bytes", p, n)
		}
		if p != "/ui/sessions" && (!strings.Contains(res.Body.String(), "show all") || !strings.Contains(res.Body.String(), "more not shown")) {
			t.Errorf("%s: a 1 MB value is not cut with a bounded show-all", p)
		}
		checkInert(t, p, res.Body.String())
		t.Logf("%s: %d bytes", p, n)
	}
}

func TestFormTextChecked(t *testing.T) {
	w := newWorld(t, "x")
	cl := w.signIn(t)
	for _, form := range []url.Values{
		{"id": {"esc-1"}, "action": {"deny"}, "reason": {"a\x00b"}},
		{"id": {"esc-1"}, "action": {"deny"}, "reason": {"a\xffb"}},
	} {
		form.Set("csrf", cl.csrf)
		if res := cl.post("/ui/escalation/decide", form, ""); res.Code != http.StatusBadRequest || !strings.Contains(res.Body.String(), "reason") {
			t.Errorf("%q: %d", form.Get("reason"), res.Code)
		}
	}
	if res := cl.post("/ui/sessions/revoke", url.Values{"csrf": {cl.csrf}, "id": {"s1"}, "reason": {"\x00"}}, ""); res.Code != http.StatusBadRequest {
		t.Errorf("revoke reason with NUL: %d", res.Code)
	}
	if len(w.esc.decided)+len(w.admin.revoked) != 0 {
		t.Fatal("a refused form changed state")
	}
}

// TestEventStream: the stream sends an event for each watch signal, and
// holds at most MaxStreams streams.
func TestEventStream(t *testing.T) {
	w := newWorld(t, "x")
	ch := make(chan struct{}, 1)
	w.c.deps.Watch = func() (<-chan struct{}, func()) { return ch, func() {} }
	cl := w.signIn(t)
	srv := httptest.NewServer(w.c.Handler())
	defer srv.Close()
	open := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/events", nil)
		req.AddCookie(cl.cookie)
		return http.DefaultClient.Do(req)
	}
	res, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Fatal("no CSP on the stream")
	}
	buf := make([]byte, 4096)
	read := func(want string) {
		t.Helper()
		var got string
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(got, want) && time.Now().Before(deadline) {
			n, err := res.Body.Read(buf)
			got += string(buf[:n])
			if err != nil {
				break
			}
		}
		if !strings.Contains(got, want) {
			t.Fatalf("stream: want %q, got %q", want, got)
		}
	}
	read("retry: 1000")
	ch <- struct{}{}
	read("event: escalations\ndata: changed\n\n")

	// Fill the remaining stream slots; one more is refused.
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	for range MaxStreams - 1 {
		r, err := open()
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v", len(held), err)
		}
		held = append(held, r)
	}
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("stream beyond the bound: %d", r.StatusCode)
	}
}
