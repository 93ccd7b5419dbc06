package githubrelay

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"ironcurtain.dev/gateway/strictjson"
)

// The differential fuzz targets below hold the relay's parse of a request
// against independent readers — an exact-key reader where a repeated name
// wins last, the same where it wins first, and encoding/json (which matches
// names case-insensitively) — applied to the bytes received and to the
// bytes forwarded. Whatever the relay accepts, every reader must read the
// same request from both; anything else must be refused.

// refReader reads one JSON value generically, names exact; a name given
// twice keeps its last (or first) value.
func refReader(firstWins bool) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		dec := jsontext.NewDecoder(strings.NewReader(string(b)),
			jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
		v, err := refValue(dec, firstWins)
		if err != nil {
			return nil, err
		}
		if _, err := dec.ReadToken(); err == nil {
			return nil, errors.New("data after the value")
		}
		return v, nil
	}
}

func refValue(dec *jsontext.Decoder, firstWins bool) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return strconv.ParseFloat(tok.String(), 64)
	case '[':
		out := []any{}
		for dec.PeekKind() != ']' {
			v, err := refValue(dec, firstWins)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		_, err := dec.ReadToken()
		return out, err
	case '{':
		out := map[string]any{}
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String() // before the token is voided
			v, err := refValue(dec, firstWins)
			if err != nil {
				return nil, err
			}
			if _, seen := out[name]; seen && firstWins {
				continue
			}
			out[name] = v
		}
		_, err := dec.ReadToken()
		return out, err
	}
	return nil, errors.New("unexpected token")
}

// graphQLView is what a reader takes a GraphQL body to ask.
type graphQLView struct {
	Query, OperationName string
	Variables            map[string]any
}

func viewOf(m any) (graphQLView, bool) {
	obj, ok := m.(map[string]any)
	if !ok {
		return graphQLView{}, false
	}
	var v graphQLView
	if q, ok := obj["query"].(string); ok {
		v.Query = q
	}
	if o, ok := obj["operationName"].(string); ok {
		v.OperationName = o
	}
	if vars, ok := obj["variables"].(map[string]any); ok && len(vars) > 0 {
		v.Variables = vars
	}
	return v, true
}

// v1GraphQL is how a Go server with encoding/json reads the body.
func v1GraphQL(b []byte) (graphQLView, error) {
	var req struct {
		Query         string         `json:"query"`
		OperationName string         `json:"operationName"`
		Variables     map[string]any `json:"variables"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return graphQLView{}, err
	}
	v := graphQLView{Query: req.Query, OperationName: req.OperationName, Variables: req.Variables}
	if len(v.Variables) == 0 {
		v.Variables = nil
	}
	return v, nil
}

// FuzzGraphQLBodyDifferential: a GraphQL body the relay accepts is read
// the same by every reader, received and forwarded, as the relay decided
// it (query, operationName, variables); "query" beside "Query", a name
// given twice, unknown names and trailing data never get that far.
func FuzzGraphQLBodyDifferential(f *testing.F) {
	for _, s := range []string{
		`{"query":"{viewer{login}}"}`,
		`{"query":"mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}","Query":"{viewer{login}}"}`,
		`{"Query":"{viewer{login}}","query":"mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"}`,
		`{"query":"{viewer{login}}","query":"mutation{x}"}`,
		`{"query":"mutation($i:AddCommentInput!){addComment(input:$i){clientMutationId}}","variables":{"i":{"subjectId":"PR_11","body":"x"}},"Variables":{"i":{"body":"y"}}}`,
		`{"query":"query Q{viewer{login}}","operationName":"Q","variables":{"a":[1,2.5,true,null,{"b":"c"}]}}`,
		`{"query":"{viewer{login}}","variables":{"a":1,"a":2}}`,
		`{"query":"{viewer{login}}"} {"query":"x"}`,
		`{"\u0071uery":"{viewer{login}}"}`,
		" {\"variables\":null,\n\"query\":\"{viewer{login}}\"}\t",
	} {
		f.Add(s)
	}
	readers := []struct {
		name string
		read func([]byte) (graphQLView, error)
	}{
		{"exact last-wins", func(b []byte) (graphQLView, error) {
			m, err := refReader(false)(b)
			if v, ok := viewOf(m); ok && err == nil {
				return v, nil
			}
			return graphQLView{}, errors.New("not an object")
		}},
		{"exact first-wins", func(b []byte) (graphQLView, error) {
			m, err := refReader(true)(b)
			if v, ok := viewOf(m); ok && err == nil {
				return v, nil
			}
			return graphQLView{}, errors.New("not an object")
		}},
		{"encoding/json", v1GraphQL},
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, err := ClassifyGraphQL([]byte(body))
		if err != nil {
			return // refused
		}
		vars, err := decodeVars(got.Variables)
		if err != nil {
			return // refused by the relay before any decision
		}
		want := graphQLView{Query: got.Query, OperationName: got.OperationName, Variables: vars}
		if len(want.Variables) == 0 {
			want.Variables = nil
		}
		for _, r := range readers {
			for _, in := range []struct{ what, b string }{{"received", body}, {"forwarded", string(got.Forward)}} {
				v, err := r.read([]byte(in.b))
				if err != nil || !reflect.DeepEqual(v, want) {
					t.Fatalf("disagreement: %s reads the %s body %q as %+v (%v); the relay decided %+v", r.name, in.what, in.b, v, err, want)
				}
			}
		}
	})
}

// FuzzRESTBodyDifferential: a REST body the relay accepts (for any of the
// write routes' field sets) is read the same by every reader, received and
// forwarded, as the relay decided it.
func FuzzRESTBodyDifferential(f *testing.F) {
	for _, s := range []string{
		`{"body":"hi"}`,
		`{"body":"ghp_x","body":"clean"}`,
		`{"state":"open","state":"closed"}`,
		`{"title":"a","Title":"b"}`,
		`{"title":"t","head":"f","base":"main","draft":true,"body":null}`,
		`{"body":"a"} {"body":"b"}`,
		`{"b\u006fdy":"x"}`,
	} {
		f.Add(s)
	}
	sets := []map[string]fieldKind{
		{"body": fieldString},
		{"title": fieldString, "head": fieldString, "base": fieldString, "body": fieldText, "draft": fieldBool,
			"maintainer_can_modify": fieldBool, "head_repo": fieldString, "issue": fieldAny},
		{"title": fieldString, "body": fieldText, "base": fieldString, "state": fieldString, "maintainer_can_modify": fieldBool},
	}
	readers := []struct {
		name string
		read func([]byte) (any, error)
	}{
		{"exact last-wins", refReader(false)},
		{"exact first-wins", refReader(true)},
		{"encoding/json", func(b []byte) (any, error) {
			var m map[string]any
			err := json.Unmarshal(b, &m)
			return m, err
		}},
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, fields := range sets {
			m, err := jsonObject([]byte(body), DefaultMaxRESTBody, fields)
			if err != nil {
				continue // refused
			}
			fwd, err := strictjson.Marshal(m)
			if err != nil {
				t.Fatalf("an accepted body does not re-encode: %v", err)
			}
			for _, r := range readers {
				for _, in := range []struct{ what, b string }{{"received", body}, {"forwarded", string(fwd)}} {
					v, err := r.read([]byte(in.b))
					if err != nil || !reflect.DeepEqual(v, any(m)) {
						t.Fatalf("disagreement: %s reads the %s body %q as %#v (%v); the relay decided %#v", r.name, in.what, in.b, v, err, m)
					}
				}
			}
		}
	})
}

// refQuery reads a query string the way servers do: split on '&' (and,
// for some, ';'), form-unescaped, a repeated name winning last or first.
func refQuery(raw string, semicolon, firstWins bool) (map[string]string, error) {
	out := map[string]string{}
	seps := "&"
	if semicolon {
		seps = "&;"
	}
	for _, part := range strings.FieldsFunc(raw, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		k, v, _ := strings.Cut(part, "=")
		k, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		v, err = url.QueryUnescape(v)
		if err != nil {
			return nil, err
		}
		if _, seen := out[k]; seen && firstWins {
			continue
		}
		out[k] = v
	}
	return out, nil
}

// FuzzQueryDifferential: a query string the relay accepts is read the same
// by every reader (last-wins, first-wins, ';' as a separator, Go's
// url.ParseQuery), received and forwarded, as the relay decided it.
func FuzzQueryDifferential(f *testing.F) {
	for _, s := range []string{"state=open", "state=open&state=closed", "a=1;b=2", "q=a+b%2Bc&per_page=5", "%73tate=x&state=y", "_method=PUT", "a[]=1&a[]=2", "=x", "a&&b=", "a=%zz"} {
		f.Add("GET", s)
		f.Add("POST", s)
	}
	f.Fuzz(func(t *testing.T, method, raw string) {
		canon, err := canonicalQuery(method, raw)
		if err != nil {
			return // refused
		}
		if method != http.MethodGet && method != http.MethodHead && canon != "" {
			t.Fatalf("a query %q was accepted on %s", raw, method)
		}
		q, err := url.ParseQuery(canon)
		if err != nil {
			t.Fatalf("the forwarded query %q does not parse: %v", canon, err)
		}
		want := map[string]string{}
		for k, vs := range q {
			want[k] = vs[0]
		}
		for _, in := range []struct{ what, q string }{{"received", raw}, {"forwarded", canon}} {
			for _, r := range []struct {
				name                 string
				semicolon, firstWins bool
			}{{"last-wins", false, false}, {"first-wins", false, true}, {"';' separates", true, false}} {
				got, err := refQuery(in.q, r.semicolon, r.firstWins)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("disagreement: a %s reader reads the %s query %q as %v (%v); the relay decided %v", r.name, in.what, in.q, got, err, want)
				}
			}
			pq, err := url.ParseQuery(in.q)
			if err != nil {
				t.Fatalf("disagreement: url.ParseQuery refuses the %s query %q: %v", in.what, in.q, err)
			}
			for k, vs := range pq {
				if len(vs) != 1 || want[k] != vs[0] {
					t.Fatalf("disagreement: url.ParseQuery reads the %s query %q as %v; the relay decided %v", in.what, in.q, pq, want)
				}
			}
			if len(pq) != len(want) {
				t.Fatalf("disagreement: url.ParseQuery reads the %s query %q as %v; the relay decided %v", in.what, in.q, pq, want)
			}
		}
	})
}
