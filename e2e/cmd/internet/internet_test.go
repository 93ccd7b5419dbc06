package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const testScript = `{"steps": [
  {"say": "looking", "code": "return 1;"},
  {"final": "saw: {{last_result}}"}
]}`

func testModel(t *testing.T) *model {
	t.Helper()
	steps, err := parseScript([]byte(testScript))
	if err != nil {
		t.Fatal(err)
	}
	return &model{key: "sk-ant-real", forbidden: []string{"agent-token-1", "agent-token-2"}, steps: steps}
}

func TestModelServe(t *testing.T) {
	m := testModel(t)
	first := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	second := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"execute_code","input":{"code":"x"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"status: ok 42"}]}]}]}`
	third := `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"},{"role":"user","content":"e"}]}`
	tests := []struct {
		name       string
		method     string
		path       string
		headers    map[string]string
		body       string
		wantStatus int
		wantNote   string
		wantInBody string
	}{
		{name: "first turn runs code", body: first, wantStatus: 200, wantNote: "key ok", wantInBody: `"stop_reason":"tool_use"`},
		{name: "second turn quotes the tool result", body: second, wantStatus: 200, wantNote: "key ok", wantInBody: "saw: status: ok 42"},
		{name: "script exhausted", body: third, wantStatus: 400, wantNote: "bad request"},
		{name: "no key", headers: map[string]string{"X-Api-Key": ""}, body: first, wantStatus: 401, wantNote: "key missing"},
		{name: "wrong key", headers: map[string]string{"X-Api-Key": "sk-ant-wrong"}, body: first, wantStatus: 401, wantNote: "key wrong"},
		{name: "agent token as the key", headers: map[string]string{"X-Api-Key": "agent-token-1"}, body: first, wantStatus: 400, wantNote: "leak: header X-Api-Key"},
		{name: "agent token in another header", headers: map[string]string{"Authorization": "Bearer agent-token-2"}, body: first, wantStatus: 400, wantNote: "leak: header Authorization"},
		{name: "agent token in the body", body: `{"model":"m","messages":[{"role":"user","content":"agent-token-1"}]}`, wantStatus: 400, wantNote: "leak: body"},
		{name: "no version", headers: map[string]string{"Anthropic-Version": ""}, body: first, wantStatus: 400, wantNote: "no version"},
		{name: "not json", body: "{", wantStatus: 400, wantNote: "bad request"},
		{name: "no messages", body: `{"model":"m","messages":[]}`, wantStatus: 400, wantNote: "bad request"},
		{name: "other path", path: "/v1/complete", body: first, wantStatus: 404, wantNote: "not found"},
		{name: "GET", method: http.MethodGet, body: "", wantStatus: 404, wantNote: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, path := tt.method, tt.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/v1/messages"
			}
			req := httptest.NewRequest(method, "https://model.internet.test"+path, strings.NewReader(tt.body))
			req.Header.Set("X-Api-Key", "sk-ant-real")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			for k, v := range tt.headers {
				if v == "" {
					req.Header.Del(k)
				} else {
					req.Header.Set(k, v)
				}
			}
			rec := httptest.NewRecorder()
			note := m.serve(rec, req)
			if rec.Code != tt.wantStatus || !strings.HasPrefix(note, tt.wantNote) {
				t.Fatalf("status %d note %q, want %d %q (body %s)", rec.Code, note, tt.wantStatus, tt.wantNote, rec.Body)
			}
			if tt.wantInBody != "" && !strings.Contains(rec.Body.String(), tt.wantInBody) {
				t.Fatalf("body %s lacks %s", rec.Body, tt.wantInBody)
			}
			if strings.Contains(note, "sk-ant") || strings.Contains(note, "agent-token") {
				t.Fatalf("the note %q holds a credential", note)
			}
			if rec.Code == 200 {
				var msg struct {
					Type    string `json:"type"`
					Content []struct {
						Type  string         `json:"type"`
						Name  string         `json:"name"`
						Input map[string]any `json:"input"`
					} `json:"content"`
					Usage struct {
						InputTokens  int `json:"input_tokens"`
						OutputTokens int `json:"output_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil || msg.Type != "message" || len(msg.Content) == 0 || msg.Usage.InputTokens == 0 {
					t.Fatalf("not a Messages API response: %s (%v)", rec.Body, err)
				}
			}
		})
	}
}

func TestParseScript(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{name: "valid", in: testScript},
		{name: "no steps", in: `{"steps":[]}`, wantErr: true},
		{name: "both code and final", in: `{"steps":[{"code":"x","final":"y"}]}`, wantErr: true},
		{name: "neither", in: `{"steps":[{"say":"x"}]}`, wantErr: true},
		{name: "unknown key", in: `{"steps":[{"final":"x","extra":1}]}`, wantErr: true},
		{name: "not json", in: `steps: []`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScript([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseScript error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestHandlerRoutes(t *testing.T) {
	h := &handler{
		log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		model: testModel(t),
		git:   &gitRemote{root: t.TempDir(), backend: "/nonexistent", token: "git-secret"},
	}
	tests := []struct {
		name       string
		host       string
		auth       [2]string
		wantStatus int
		wantBody   string
	}{
		{name: "page", host: "allowed.internet.test", wantStatus: 200, wantBody: "hello from allowed.internet.test"},
		{name: "page with port", host: "blocked.internet.test:443", wantStatus: 200, wantBody: "hello from blocked.internet.test"},
		{name: "model GET", host: "model.internet.test", wantStatus: 404},
		{name: "git without credentials", host: "git.internet.test", wantStatus: 401},
		{name: "git with a wrong token", host: "git.internet.test", auth: [2]string{"x", "nope"}, wantStatus: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://"+tt.host+"/project.git/info/refs?service=git-upload-pack", nil)
			if tt.auth[0] != "" {
				req.SetBasicAuth(tt.auth[0], tt.auth[1])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%s: %d %q, want %d %q", tt.host, rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

func TestLastToolResult(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "string", in: `"plain"`, want: "plain"},
		{name: "tool result with text blocks", in: `[{"type":"tool_result","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`, want: "a\nb"},
		{name: "tool result with string", in: `[{"type":"tool_result","content":"s"}]`, want: "s"},
		{name: "text block", in: `[{"type":"text","text":"t"}]`, want: "t"},
		{name: "garbage", in: `{`, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lastToolResult(json.RawMessage(tt.in)); got != tt.want {
				t.Fatalf("lastToolResult(%s) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzModelReply: any request body gets an answer or an error, never a
// panic, and a reply always is a well-formed message.
func FuzzModelReply(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":[{"type":"tool_result","content":[{"type":"text"}]}]},{"role":"user","content":[]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":{"x":1}}]}`))
	m := &model{key: "k", steps: []step{{Code: "x"}, {Final: "{{last_result}}"}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		reply, err := m.reply(body)
		if err != nil {
			return
		}
		b, err := json.Marshal(reply)
		if err != nil {
			t.Fatalf("reply does not marshal: %v", err)
		}
		if !strings.Contains(string(b), `"type":"message"`) {
			t.Fatalf("reply %s is not a message", b)
		}
	})
}
