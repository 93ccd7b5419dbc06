package gate

import (
	"testing"

	"ironcurtain.dev/gateway/internal/servers"
)

func TestCapResult(t *testing.T) {
	tests := []struct {
		name     string
		in       servers.Result
		max      int
		wantText string
		wantCut  bool
	}{
		{name: "fits", in: servers.Text("hello"), max: 5, wantText: "hello"},
		{name: "cut on a character boundary", in: servers.Text("ééé"), max: 3, wantText: "é[result cut by the gateway: 6 bytes, the limit is 3]", wantCut: true},
		{name: "second text dropped", in: servers.Result{Content: []servers.Content{{Type: "text", Text: "abc"}, {Type: "text", Text: "def"}}}, max: 3,
			wantText: "abc[result cut by the gateway: 6 bytes, the limit is 3; 1 item(s) left out]", wantCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, cut := capResult(tt.in, tt.max)
			got := ""
			for _, c := range out.Content {
				got += c.Text
			}
			if got != tt.wantText || cut != tt.wantCut {
				t.Fatalf("got %q cut=%v, want %q cut=%v", got, cut, tt.wantText, tt.wantCut)
			}
		})
	}
}

func TestExactCall(t *testing.T) {
	tests := []struct {
		name       string
		a, b       map[string]any
		pa, pb     map[string]any
		wantEquals bool
	}{
		{name: "same call, keys in any order", a: map[string]any{"x": 1.0, "y": "z"}, b: map[string]any{"y": "z", "x": 1.0}, wantEquals: true},
		{name: "same policy args, other agent args", a: map[string]any{"path": "a.txt"}, b: map[string]any{"path": "./a.txt"},
			pa: map[string]any{"path": "/s/a.txt"}, pb: map[string]any{"path": "/s/a.txt"}, wantEquals: false},
		{name: "same agent args, other policy args", a: map[string]any{"remote": "origin"}, b: map[string]any{"remote": "origin"},
			pa: map[string]any{"remote": "https://github.com/acme/app"}, pb: map[string]any{"remote": "https://evil.example/app"}, wantEquals: false},
		{name: "nested values", a: map[string]any{"o": map[string]any{"k": []any{1.0, "a"}}}, b: map[string]any{"o": map[string]any{"k": []any{1.0, "a"}}}, wantEquals: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y := exactCall(tt.a, tt.pa), exactCall(tt.b, tt.pb)
			if x == nil || y == nil {
				t.Fatal("no exact call")
			}
			if (string(x) == string(y)) != tt.wantEquals {
				t.Fatalf("%s vs %s: equal = %v, want %v", x, y, string(x) == string(y), tt.wantEquals)
			}
		})
	}
	if exactCall(map[string]any{"f": func() {}}, nil) != nil {
		t.Fatal("an unencodable call has an exact form: a retry could match it")
	}
}
