package structured

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"ironcurtain.dev/compiler"
	"ironcurtain.dev/compiler/cache"
	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/model"
)

type answer struct {
	Color string `json:"color"`
	Count int    `json:"count"`
}

func answerSchema() *jsonschema.Schema {
	return Object(map[string]*jsonschema.Schema{
		"color": Enum("red", "green"),
		"count": {Type: "integer"},
	}, "color", "count")
}

func checkCount(a *answer) error {
	if a.Count > 10 {
		return fmt.Errorf("count %d is above 10", a.Count)
	}
	return nil
}

// newRunner returns a Runner talking to a fake server through the real SDK
// of provider.
func newRunner(t *testing.T, provider model.Provider, answers ...fakemodel.Answer) (*Runner, *fakemodel.Server, *bytes.Buffer) {
	t.Helper()
	script := &fakemodel.Script{Entries: []fakemodel.Entry{{Name: "all", Answers: answers}}}
	srv := fakemodel.New(script.Respond)
	t.Cleanup(srv.Close)
	base := srv.AnthropicURL()
	if provider == model.OpenAI {
		base = srv.OpenAIURL()
	}
	m, err := model.New(model.Config{Spec: model.Spec{Provider: provider, Name: "test-model"}, BaseURL: base, APIKey: "k", MaxRetries: 0})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	log := model.NewLog(&logBuf, nil)
	store, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &Runner{Model: model.Logged(m, log, "test"), ModelName: string(provider) + ":test-model", Cache: store, Log: log}, srv, &logBuf
}

func TestGenerate(t *testing.T) {
	tests := []struct {
		name      string
		answers   []fakemodel.Answer
		want      answer
		wantCalls int
		wantErr   error
		feedback  string // must appear in the retry prompt
	}{
		{
			name:      "valid first reply",
			answers:   []fakemodel.Answer{{Text: `{"color":"red","count":3}`}},
			want:      answer{Color: "red", Count: 3},
			wantCalls: 1,
		},
		{
			name:      "fenced reply with prose",
			answers:   []fakemodel.Answer{{Text: "Here it is:\n```json\n{\"color\": \"green\", \"count\": 1}\n```\nDone."}},
			want:      answer{Color: "green", Count: 1},
			wantCalls: 1,
		},
		{
			name:      "prose around a bare object",
			answers:   []fakemodel.Answer{{Text: `Sure! {"color":"green","count":2} Hope that helps {}`}},
			want:      answer{Color: "green", Count: 2},
			wantCalls: 1,
		},
		{
			name:      "truncated JSON then valid",
			answers:   []fakemodel.Answer{{Text: `{"color":"red","cou`}, {Text: `{"color":"red","count":4}`}},
			want:      answer{Color: "red", Count: 4},
			wantCalls: 2,
			feedback:  "not valid JSON",
		},
		{
			name:      "schema violation then valid",
			answers:   []fakemodel.Answer{{Text: `{"color":"blue","count":4}`}, {Text: `{"color":"red","count":4}`}},
			want:      answer{Color: "red", Count: 4},
			wantCalls: 2,
			feedback:  "does not match the schema",
		},
		{
			name:      "unknown field then valid",
			answers:   []fakemodel.Answer{{Text: `{"color":"red","count":4,"extra":true}`}, {Text: `{"color":"red","count":4}`}},
			want:      answer{Color: "red", Count: 4},
			wantCalls: 2,
			feedback:  "extra",
		},
		{
			name:      "semantic check then valid",
			answers:   []fakemodel.Answer{{Text: `{"color":"red","count":40}`}, {Text: `{"color":"red","count":9}`}},
			want:      answer{Color: "red", Count: 9},
			wantCalls: 2,
			feedback:  "count 40 is above 10",
		},
		{
			name:      "never valid",
			answers:   []fakemodel.Answer{{Text: "no json"}, {Text: "still none"}, {Text: `{"color":1}`}},
			wantCalls: 3,
			wantErr:   ErrInvalidReply,
		},
		{
			name:      "provider error is not retried",
			answers:   []fakemodel.Answer{{Status: 400}},
			wantCalls: 1,
			wantErr:   errAny,
		},
	}
	for _, provider := range []model.Provider{model.Anthropic, model.OpenAI} {
		for _, tt := range tests {
			t.Run(string(provider)+"/"+tt.name, func(t *testing.T) {
				r, srv, _ := newRunner(t, provider, tt.answers...)
				res, err := Generate(context.Background(), r, Request{Step: "test", System: "sys", User: "give me an answer", Schema: answerSchema()}, checkCount)
				if srv.Calls() != tt.wantCalls {
					t.Errorf("model calls = %d, want %d", srv.Calls(), tt.wantCalls)
				}
				if tt.wantErr != nil {
					if err == nil || (tt.wantErr != errAny && !errors.Is(err, tt.wantErr)) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Value != tt.want {
					t.Errorf("value = %+v, want %+v", res.Value, tt.want)
				}
				if tt.feedback != "" {
					reqs := srv.Requests()
					last := reqs[len(reqs)-1]
					if !strings.Contains(last.Last(), tt.feedback) || !strings.Contains(last.Last(), "failed validation") {
						t.Errorf("retry prompt %q does not feed back %q", last.Last(), tt.feedback)
					}
					if len(last.Messages) != 3 || last.Messages[1].Role != compiler.Assistant {
						t.Errorf("retry conversation = %+v, want user, assistant, user", last.Messages)
					}
				}
				if n := len(res.Conversation); n != 2 || res.Conversation[1].Role != compiler.Assistant {
					t.Errorf("conversation has %d turns, want user+assistant", n)
				}
			})
		}
	}
}

var errAny = errors.New("any error")

func TestGenerateCache(t *testing.T) {
	r, srv, logBuf := newRunner(t, model.Anthropic, fakemodel.Answer{Text: "oops"}, fakemodel.Answer{Text: `{"color":"red","count":1}`})
	req := Request{Step: "cached", System: "sys", User: "u", Schema: answerSchema()}
	first, err := Generate[answer](context.Background(), r, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached || srv.Calls() != 2 {
		t.Fatalf("first run: cached %v, calls %d", first.Cached, srv.Calls())
	}
	second, err := Generate[answer](context.Background(), r, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || srv.Calls() != 2 {
		t.Fatalf("second run: cached %v, calls %d (want no new call)", second.Cached, srv.Calls())
	}
	if second.Value != first.Value {
		t.Errorf("cached value %+v != %+v", second.Value, first.Value)
	}
	if got := r.Stats(); got != (Stats{ModelCalls: 2, CacheHits: 1, CacheMisses: 1}) {
		t.Errorf("stats = %+v", got)
	}
	if !strings.Contains(logBuf.String(), `"cache":"hit"`) {
		t.Errorf("log lacks the cache hit:\n%s", logBuf.String())
	}

	// Any change of the prompt is a different key.
	changed := req
	changed.System = "sys2"
	if _, err := Generate[answer](context.Background(), r, changed, nil); err == nil {
		t.Fatal("changed prompt was answered from the cache")
	}
}

func TestGenerateRevalidatesCache(t *testing.T) {
	r, srv, _ := newRunner(t, model.OpenAI, fakemodel.Answer{Text: `{"color":"red","count":5}`}, fakemodel.Answer{Text: `{"color":"red","count":2}`})
	req := Request{Step: "s", User: "u", Schema: answerSchema()}
	if _, err := Generate[answer](context.Background(), r, req, nil); err != nil {
		t.Fatal(err)
	}
	// A stricter check makes the cached reply invalid: the model is asked again.
	strict := func(a *answer) error {
		if a.Count > 3 {
			return errors.New("too many")
		}
		return nil
	}
	res, err := Generate(context.Background(), r, req, strict)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cached || res.Value.Count != 2 || srv.Calls() != 2 {
		t.Errorf("got %+v cached=%v after %d calls", res.Value, res.Cached, srv.Calls())
	}
}

func TestExtractJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "bare", in: `{"a":1}`, want: `{"a":1}`},
		{name: "whitespace", in: " \n{ \"a\" : [1, 2] }\n", want: `{"a":[1,2]}`},
		{name: "fence", in: "```json\n{\"a\":1}\n```", want: `{"a":1}`},
		{name: "fence without language", in: "x\n```\n{\"a\":1}\n```", want: `{"a":1}`},
		{name: "trailing prose", in: `{"a":"}"} and {"b":2}`, want: `{"a":"}"}`},
		{name: "no object", in: "nothing here", wantErr: true},
		{name: "array only", in: "[1,2]", wantErr: true},
		{name: "unterminated", in: `{"a":`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := extractJSON(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "```json\n{}\n```", "{", "```", "x{\"a\":[}", `{"a":"\u0000"}`} {
		f.Add(s)
	}
	schema := answerSchema()
	resolved, err := schema.Resolve(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := extractJSON(s)
		if err != nil {
			return
		}
		if raw[0] != '{' {
			t.Fatalf("extracted %q from %q, not an object", raw, s)
		}
		// Whatever was extracted must decode (or fail) without panicking.
		_, _ = decode[answer](raw, schema, resolved, checkCount)
	})
}

func TestProblemsListsEveryViolation(t *testing.T) {
	schema := Object(map[string]*jsonschema.Schema{
		"rules": Array(Object(map[string]*jsonschema.Schema{
			"name": Pattern("^fs-", ""),
			"then": Enum("allow", "escalate"),
			"tags": MinItems(Array(String("")), 1),
		}, "name", "then")),
		"kind": OneOf(
			Object(map[string]*jsonschema.Schema{"k": Const("a")}, "k"),
			Object(map[string]*jsonschema.Schema{"k": Const("b"), "x": Bool("")}, "k", "x"),
		),
	}, "rules")
	var v any
	if err := json.Unmarshal([]byte(`{"rules":[{"name":"x","then":"deny","tags":[],"extra":1},{"then":"allow"}],"kind":{"k":"b"},"other":true}`), &v); err != nil {
		t.Fatal(err)
	}
	var got []string
	problems(schema, v, "", &got)
	want := []string{
		`rules[0].name: "x" does not match ^fs-`,
		`rules[0].then: "deny" is not one of ["allow","escalate"]`,
		`rules[0].tags: has 0 items, want at least 1`,
		`rules[0]: unknown property "extra"`,
		`rules[1]: missing required property "name"`,
		`kind: matches none of the allowed forms`,
		`kind: missing required property "x"`,
		`(root): unknown property "other"`,
	}
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("problems lack %q:\n%s", w, joined)
		}
	}
	var none []string
	problems(schema, map[string]any{"rules": []any{}}, "", &none)
	if len(none) != 0 {
		t.Errorf("valid value reported: %v", none)
	}
}
