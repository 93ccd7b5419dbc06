package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFakeGitHub(t *testing.T) {
	f := newFakeGitHub("gh-secret")
	for _, tc := range []struct {
		name, method, path, auth, body string
		status                         int
		noteHas, bodyHas               string
	}{
		{name: "no token", method: "GET", path: "/repos/acme/app", status: http.StatusUnauthorized, noteHas: "wrong token"},
		{name: "wrong token", method: "GET", path: "/repos/acme/app", auth: "token nope", status: http.StatusUnauthorized, noteHas: "wrong token"},
		{name: "repository", method: "GET", path: "/repos/acme/app", auth: "token gh-secret", status: http.StatusOK, bodyHas: `"full_name":"acme/app"`},
		{name: "user", method: "GET", path: "/user", auth: "Bearer gh-secret", status: http.StatusOK, bodyHas: ghLogin},
		{name: "create over GraphQL", method: "POST", path: "/graphql", auth: "token gh-secret", body: `{"query":"mutation($input:CreatePullRequestInput!){createPullRequest(input:$input){pullRequest{id url}}}"}`,
			status: http.StatusOK, noteHas: "graphql [createPullRequest]", bodyHas: "/acme/app/pull/11"},
		{name: "the created PR is the bot's", method: "GET", path: "/repos/acme/app/pulls/11", auth: "token gh-secret", status: http.StatusOK, bodyHas: ghLogin},
		{name: "PR 1 is someone else's", method: "GET", path: "/repos/acme/app/pulls/1", auth: "token gh-secret", status: http.StatusOK, bodyHas: `"human"`},
		{name: "merge is recorded", method: "POST", path: "/graphql", auth: "token gh-secret", body: `{"query":"mutation{mergePullRequest(input:{pullRequestId:\"PR_11\"}){clientMutationId}}"}`,
			status: http.StatusOK, noteHas: "mergePullRequest"},
		{name: "unknown PR", method: "GET", path: "/repos/acme/app/pulls/99", auth: "token gh-secret", status: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			note := f.serve(w, r)
			if w.Code != tc.status || !strings.Contains(note, tc.noteHas) || !strings.Contains(w.Body.String(), tc.bodyHas) {
				t.Fatalf("%s %s: %d %q, note %q", tc.method, tc.path, w.Code, w.Body.String(), note)
			}
			if strings.Contains(note, "gh-secret") {
				t.Fatalf("the note holds the token: %q", note)
			}
		})
	}
}
