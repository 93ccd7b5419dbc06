package github

import (
	"context"
	"encoding/json"
	"fmt"

	gh "github.com/google/go-github/v88/github"
)

// Output limits: a body longer than this is cut in results.
const (
	maxBodyOut       = 20000
	maxCommentsShown = 30
)

// prOut is the agent's view of a pull request.
type prOut struct {
	Number    int    `json:"number"`
	Title     string `json:"title"`
	State     string `json:"state"`
	Draft     bool   `json:"draft"`
	Merged    bool   `json:"merged"`
	Author    string `json:"author"`
	Head      string `json:"head"`
	Base      string `json:"base"`
	URL       string `json:"url"`
	CreatedAt string `json:"created_at,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
	Body      string `json:"body,omitempty"`
	Comments  int    `json:"comments,omitempty"`
	Commits   int    `json:"commits,omitempty"`
	Changed   int    `json:"changed_files,omitempty"`
	Mergeable *bool  `json:"mergeable,omitempty"`
}

func toPR(p *gh.PullRequest, withBody bool) prOut {
	o := prOut{
		Number: p.GetNumber(), Title: p.GetTitle(), State: p.GetState(), Draft: p.GetDraft(),
		Merged: p.GetMerged(), Author: p.GetUser().GetLogin(), Head: p.GetHead().GetLabel(),
		Base: p.GetBase().GetRef(), URL: p.GetHTMLURL(),
		Comments: p.GetComments(), Commits: p.GetCommits(), Changed: p.GetChangedFiles(), Mergeable: p.Mergeable,
	}
	if o.Head == "" {
		o.Head = p.GetHead().GetRef()
	}
	if t := p.GetCreatedAt(); !t.IsZero() {
		o.CreatedAt = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	if t := p.GetUpdatedAt(); !t.IsZero() {
		o.UpdatedAt = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	if withBody {
		o.Body = cut(p.GetBody(), maxBodyOut)
	}
	return o
}

type commentOut struct {
	ID        int64  `json:"id"`
	Author    string `json:"author"`
	CreatedAt string `json:"created_at,omitempty"`
	Body      string `json:"body"`
	URL       string `json:"url,omitempty"`
}

func toComment(c *gh.IssueComment) commentOut {
	o := commentOut{ID: c.GetID(), Author: c.GetUser().GetLogin(), Body: cut(c.GetBody(), maxBodyOut), URL: c.GetHTMLURL()}
	if t := c.GetCreatedAt(); !t.IsZero() {
		o.CreatedAt = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	return o
}

func jsonText(v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding result: %w", err)
	}
	return string(b), nil
}

func (s *Server) prCreate(ctx context.Context, a args) (string, error) {
	np := &gh.NewPullRequest{
		Title: gh.Ptr(a.str["title"]),
		Head:  gh.Ptr(a.str["head"]),
		Base:  gh.Ptr(a.str["base"]),
	}
	if a.has("body") {
		np.Body = gh.Ptr(a.str["body"])
	}
	if d, ok := a.bools["draft"]; ok {
		np.Draft = gh.Ptr(d)
	}
	pr, _, err := s.client.PullRequests.Create(ctx, a.owner, a.repo, np)
	if err != nil {
		return "", err
	}
	return jsonText(toPR(pr, false))
}

func (s *Server) prView(ctx context.Context, a args) (string, error) {
	pr, _, err := s.client.PullRequests.Get(ctx, a.owner, a.repo, a.number)
	if err != nil {
		return "", err
	}
	return jsonText(toPR(pr, true))
}

func (s *Server) prList(ctx context.Context, a args) (string, error) {
	opts := &gh.PullRequestListOptions{
		State: a.str["state"],
		Head:  a.str["head"],
		Base:  a.str["base"],
	}
	opts.PerPage = a.ints["per_page"]
	opts.Page = a.ints["page"]
	prs, _, err := s.client.PullRequests.List(ctx, a.owner, a.repo, opts)
	if err != nil {
		return "", err
	}
	out := make([]prOut, 0, len(prs))
	for _, p := range prs {
		out = append(out, toPR(p, false))
	}
	return jsonText(out)
}

func (s *Server) prComment(ctx context.Context, a args) (string, error) {
	// A pull request's conversation comments are issue comments. Check the
	// number names a pull request, so the tool does what it says.
	if _, _, err := s.client.PullRequests.Get(ctx, a.owner, a.repo, a.number); err != nil {
		return "", err
	}
	c, _, err := s.client.Issues.CreateComment(ctx, a.owner, a.repo, a.number, &gh.IssueComment{Body: gh.Ptr(a.str["body"])})
	if err != nil {
		return "", err
	}
	return jsonText(toComment(c))
}

func (s *Server) prEdit(ctx context.Context, a args) (string, error) {
	if !a.has("title") && !a.has("body") && !a.has("base") {
		return "", &agentError{msg: "pr_edit: give at least one of title, body or base"}
	}
	if err := s.requireOwnPR(ctx, a, "pr_edit"); err != nil {
		return "", err
	}
	upd := &gh.PullRequest{}
	if a.has("title") {
		upd.Title = gh.Ptr(a.str["title"])
	}
	if a.has("body") {
		upd.Body = gh.Ptr(a.str["body"])
	}
	if a.has("base") {
		upd.Base = &gh.PullRequestBranch{Ref: gh.Ptr(a.str["base"])}
	}
	pr, _, err := s.client.PullRequests.Edit(ctx, a.owner, a.repo, a.number, upd)
	if err != nil {
		return "", err
	}
	return jsonText(toPR(pr, false))
}

func (s *Server) prClose(ctx context.Context, a args) (string, error) {
	if err := s.requireOwnPR(ctx, a, "pr_close"); err != nil {
		return "", err
	}
	pr, _, err := s.client.PullRequests.Edit(ctx, a.owner, a.repo, a.number, &gh.PullRequest{State: gh.Ptr("closed")})
	if err != nil {
		return "", err
	}
	return jsonText(toPR(pr, false))
}

type issueOut struct {
	Number    int          `json:"number"`
	Title     string       `json:"title"`
	State     string       `json:"state"`
	Author    string       `json:"author"`
	Labels    []string     `json:"labels,omitempty"`
	URL       string       `json:"url"`
	IsPR      bool         `json:"is_pull_request,omitempty"`
	CreatedAt string       `json:"created_at,omitempty"`
	Body      string       `json:"body,omitempty"`
	Comments  int          `json:"comments"`
	Recent    []commentOut `json:"recent_comments,omitempty"`
}

func (s *Server) issueView(ctx context.Context, a args) (string, error) {
	is, _, err := s.client.Issues.Get(ctx, a.owner, a.repo, a.number)
	if err != nil {
		return "", err
	}
	o := issueOut{
		Number: is.GetNumber(), Title: is.GetTitle(), State: is.GetState(), Author: is.GetUser().GetLogin(),
		URL: is.GetHTMLURL(), IsPR: is.IsPullRequest(), Body: cut(is.GetBody(), maxBodyOut), Comments: is.GetComments(),
	}
	if t := is.GetCreatedAt(); !t.IsZero() {
		o.CreatedAt = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	for _, l := range is.Labels {
		o.Labels = append(o.Labels, l.GetName())
	}
	if o.Comments > 0 {
		// The most recent comments: the last page of maxCommentsShown.
		opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: maxCommentsShown}}
		if o.Comments > maxCommentsShown {
			opts.Page = (o.Comments + maxCommentsShown - 1) / maxCommentsShown
		}
		cs, _, err := s.client.Issues.ListComments(ctx, a.owner, a.repo, a.number, opts)
		if err != nil {
			return "", err
		}
		for _, c := range cs {
			o.Recent = append(o.Recent, toComment(c))
		}
	}
	return jsonText(o)
}

func (s *Server) issueComment(ctx context.Context, a args) (string, error) {
	c, _, err := s.client.Issues.CreateComment(ctx, a.owner, a.repo, a.number, &gh.IssueComment{Body: gh.Ptr(a.str["body"])})
	if err != nil {
		return "", err
	}
	return jsonText(toComment(c))
}
