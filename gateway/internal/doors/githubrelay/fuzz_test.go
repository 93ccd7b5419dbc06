package githubrelay

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

func itoa(i int) string { return strconv.Itoa(i) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzClassifyREST: whatever the path, a request the classifier lets
// through as an allowed action is never a merge: its canonical path, read
// back, classifies the same way, and no segment of it is "merge" unless
// the action is a read of the merge status.
func FuzzClassifyREST(f *testing.F) {
	for _, s := range []string{"/repos/a/b/pulls/1/merge", "/repos/a/b/pulls/1/m%65rge/", "//repos/A/B/pulls", "/repos/a/b/hooks/1", "/graphql", "/repos/a/b/pulls/1/x/../merge"} {
		f.Add("PUT", s, "")
		f.Add("POST", s, "a=1")
	}
	f.Fuzz(func(t *testing.T, method, path, query string) {
		rt, err := ClassifyREST(method, path, query, http.Header{})
		if err != nil {
			return
		}
		again, err := ClassifyREST(method, rt.Path, query, http.Header{})
		if err != nil || again.Action != rt.Action || again.Path != rt.Path || again.Owner != rt.Owner || again.Repo != rt.Repo || again.Number != rt.Number {
			t.Fatalf("canonical path %q of %q classifies differently: %+v, %v (first %+v)", rt.Path, path, again, err, rt)
		}
		segs := strings.Split(rt.Path, "/")
		if last := segs[len(segs)-1]; last == "merge" && method != "GET" && method != "HEAD" && rt.Action != ActionMerge && rt.Action != ActionForbidden {
			t.Fatalf("%s %q classified %q", method, path, rt.Action)
		}
	})
}

// FuzzClassifyGraphQL: a document the classifier accepts holds no mutation
// field outside the allowlist, checked by an independent walk of every
// operation (fragments expanded by name, without memoisation, depth-bounded).
func FuzzClassifyGraphQL(f *testing.F) {
	for _, q := range []string{
		`mutation { createPullRequest(input: {}) { clientMutationId } }`,
		`mutation { ... on Mutation { closePullRequest(input: {}) { clientMutationId } } }`,
		`mutation { ...F } fragment F on Mutation { addComment(input: {}) { clientMutationId } }`,
		`query A { viewer { login } } mutation B { mergePullRequest(input: {}) { clientMutationId } }`,
		`{ a: viewer { login } }`,
	} {
		f.Add(`{"query":` + quote(q) + `}`)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, err := ClassifyGraphQL([]byte(body))
		if err != nil {
			return
		}
		var req struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatalf("accepted a body that is not JSON: %v", err)
		}
		doc, err := parser.ParseQuery(&ast.Source{Input: req.Query})
		if err != nil {
			t.Fatalf("accepted a query that does not parse: %v", err)
		}
		for _, op := range doc.Operations {
			if op.Operation != ast.Query && op.Operation != ast.Mutation {
				t.Fatalf("accepted a %s", op.Operation)
			}
			if op.Operation != ast.Mutation {
				continue
			}
			for _, name := range naiveRoot(doc, op.SelectionSet, 0) {
				if _, ok := Mutations[name]; !ok && name != "__typename" {
					t.Fatalf("accepted mutation %s (%+v)", name, got)
				}
			}
		}
	})
}

func naiveRoot(doc *ast.QueryDocument, set ast.SelectionSet, depth int) []string {
	if depth > 8 {
		return nil
	}
	var out []string
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			out = append(out, s.Name)
		case *ast.InlineFragment:
			out = append(out, naiveRoot(doc, s.SelectionSet, depth+1)...)
		case *ast.FragmentSpread:
			if fr := doc.Fragments.ForName(s.Name); fr != nil {
				out = append(out, naiveRoot(doc, fr.SelectionSet, depth+1)...)
			}
		}
	}
	return out
}

func BenchmarkClassifyREST(b *testing.B) {
	h := http.Header{"Accept": {"application/vnd.github+json"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ClassifyREST("POST", "/repos/acme/app/issues/3/comments", "", h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClassifyGraphQL(b *testing.B) {
	body := []byte(`{"query":"mutation M($i: CreatePullRequestInput!) { createPullRequest(input: $i) { pullRequest { url number } } }","variables":{"i":{"title":"t","baseRefName":"main","headRefName":"f","repositoryId":"R_1"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ClassifyGraphQL(body); err != nil {
			b.Fatal(err)
		}
	}
}
