package ghapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v93/github"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
)

// The operations' names.
const (
	OpIssueView     = "github.issue.view"
	OpIssueComment  = "github.issue.comment"
	OpIssueEdit     = "github.issue.edit"
	OpPRCreate      = "github.pr.create"
	OpReviewRequest = "github.pr.review_request"
	OpReview        = "github.pr.review"
	OpRepoFile      = "github.repo.file"
	OpChecksList    = "github.checks.list"
	OpChecksView    = "github.checks.view"
	OpPRMerge       = "github.pr.merge"
	OpGitCredential = "github.git.credential"
)

// InDefaultToolsets reports whether op may be a member of the extension's
// role toolsets: every operation but github.pr.merge, which a binding must
// grant by its name.
func InDefaultToolsets(op string) bool { return op != OpPRMerge }

// Bounds of one answer.
const (
	// MaxComments bounds the comments github.issue.view shows (the
	// oldest first); comments_truncated says there are more.
	MaxComments = 300
	// MaxReviews and MaxCheckRuns bound the reviews and check runs one
	// answer shows.
	MaxReviews   = 100
	MaxCheckRuns = 100
	// DefaultFileBytes and MaxFileBytes bound github.repo.file.
	DefaultFileBytes = 256 << 10
	MaxFileBytes     = 1 << 20
	// MaxCheckText bounds a check run's output text in github.checks.view.
	MaxCheckText = 64 << 10
)

// Options are what the operations are built on.
type Options struct {
	// Credentials authorize the calls (nil: the operations are registered
	// for their names only, and every call is github_not_configured).
	Credentials Credentials
	// BaseURL is GitHub's API: DefaultBaseURL when empty, for GitHub
	// Enterprise Server https://HOST/api/v3/.
	BaseURL string
	// GitHost is the host git clones from, for github.git.credential:
	// github.com for api.github.com, otherwise BaseURL's host, when empty.
	GitHost string
	// Allow says whether the calling Work may touch repo ("owner/repo",
	// lower case). nil refuses every repository.
	Allow func(auth extension.Authority, repo string) bool
	// WorkRepository names the Work's own repository ("owner/repo"), for
	// github.git.credential when git sends no path. Optional.
	WorkRepository func(auth extension.Authority) (string, bool)
	// HTTPClient sends the requests (nil: a client with DefaultTimeout).
	HTTPClient *http.Client
	// Now is the clock (required with Credentials), read only to say when
	// a rate limit given as a delay ends.
	Now func() time.Time
}

type service struct {
	o       Options
	base    string
	gitHost string
	scheme  string

	ident identity
}

// Operations answers the github.* operations (see the package doc for how
// the extension registers them). Its error never quotes a configured
// value.
func Operations(o Options) ([]extension.Operation, error) {
	base, err := baseURL(o.BaseURL)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		if o.Credentials != nil {
			return nil, errors.New("ghapi: Options.Now is required with Credentials")
		}
		o.Now = func() time.Time { return time.Time{} } // never read: every call is refused
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultHTTPClient()
	}
	u, _ := url.Parse(base)
	s := &service{o: o, base: base, gitHost: strings.ToLower(o.GitHost), scheme: u.Scheme}
	if s.gitHost == "" {
		s.gitHost = strings.ToLower(u.Host)
		if s.gitHost == "api.github.com" {
			s.gitHost = "github.com"
		}
	}
	return s.operations(), nil
}

func (s *service) operations() []extension.Operation {
	return []extension.Operation{
		{Name: OpIssueView, Summary: "Read an issue or pull request with its comments; for a pull request also its reviews and the check runs of its head.",
			InputSchema: schema(`"repo","number"`, repoProp+`,`+numberProp),
			Guidance:    guideIssueView, Handler: s.issueView},
		{Name: OpIssueComment, Summary: "Add a comment to an issue or pull request.",
			InputSchema: schema(`"repo","number","body"`, repoProp+`,`+numberProp+`,"body":{"type":"string","minLength":1,"description":"the comment, GitHub Markdown"}`),
			Guidance:    guideIssueComment, Handler: s.issueComment},
		{Name: OpIssueEdit, Summary: "Change an issue's or pull request's title, body, labels or assignees.",
			InputSchema: schema(`"repo","number"`, repoProp+`,`+numberProp+`,"title":{"type":"string","minLength":1},"body":{"type":"string"},`+
				`"labels":{"type":"array","items":{"type":"string"},"description":"the whole set of labels: replaces the current ones; [] removes all"},`+
				`"assignees":{"type":"array","items":{"type":"string"},"description":"the whole set of assignees' logins: replaces the current ones; [] removes all"}`),
			Guidance: guideIssueEdit, Handler: s.issueEdit},
		{Name: OpPRCreate, Summary: "Open a pull request from a pushed branch.",
			InputSchema: schema(`"repo","title","head","base"`, repoProp+`,"title":{"type":"string","minLength":1},"body":{"type":"string"},`+
				`"head":{"type":"string","minLength":1,"description":"the branch with the changes (owner:branch for a fork)"},`+
				`"base":{"type":"string","minLength":1,"description":"the branch to merge into"},"draft":{"type":"boolean"}`),
			Guidance: guidePRCreate, Handler: s.prCreate},
		{Name: OpReviewRequest, Summary: "Ask people or teams to review a pull request.",
			InputSchema: schema(`"repo","number"`, repoProp+`,`+numberProp+`,"reviewers":{"type":"array","items":{"type":"string"},"description":"users' logins"},`+
				`"team_reviewers":{"type":"array","items":{"type":"string"},"description":"teams' slugs"}`),
			Guidance: guideReviewRequest, Handler: s.reviewRequest},
		{Name: OpReview, Summary: "Submit a review of a pull request: approve, request changes, or comment.",
			InputSchema: schema(`"repo","number","event"`, repoProp+`,`+numberProp+`,"event":{"enum":["approve","request_changes","comment"]},`+
				`"body":{"type":"string","description":"the review's text; required for request_changes and comment"},`+
				`"commit_id":{"type":"string","description":"the head commit reviewed; the pull request's current head when absent"}`),
			Guidance: guideReview, Handler: s.review},
		{Name: OpRepoFile, Summary: "Read one file of a repository at a branch, tag or commit.",
			InputSchema: schema(`"repo","path"`, repoProp+`,"path":{"type":"string","minLength":1,"description":"the file's path from the repository's root"},`+
				`"ref":{"type":"string","description":"a branch, tag or commit SHA; the default branch when absent"},`+
				`"max_bytes":{"type":"integer","minimum":1,"maximum":1048576,"description":"refuse a larger file (default 262144)"}`),
			Guidance: guideRepoFile, Handler: s.repoFile},
		{Name: OpChecksList, Summary: "List the check runs of a commit, branch, tag or pull request's head.",
			InputSchema: schema(`"repo"`, repoProp+`,"ref":{"type":"string","description":"a commit SHA, branch or tag"},`+
				`"number":{"type":"integer","minimum":1,"description":"a pull request, instead of ref: its head"}`),
			Guidance: guideChecksList, Handler: s.checksList},
		{Name: OpChecksView, Summary: "Read one check run with its output.",
			InputSchema: schema(`"repo","id"`, repoProp+`,"id":{"type":"integer","minimum":1,"description":"the check run's id, from github.checks.list"}`),
			Guidance:    guideChecksView, Handler: s.checksView},
		{Name: OpPRMerge, Summary: "Merge a pull request (granted by name only, never in a role toolset).",
			InputSchema: schema(`"repo","number"`, repoProp+`,`+numberProp+`,"method":{"enum":["merge","squash","rebase"]},`+
				`"sha":{"type":"string","description":"merge only if the head is still this commit"},"commit_title":{"type":"string"},"commit_message":{"type":"string"}`),
			Guidance: guidePRMerge, Handler: s.prMerge},
		{Name: OpGitCredential, Summary: "Answer git's credential request with a short-lived token for the Work's repository.",
			InputSchema: schema(`"protocol","host"`, `"protocol":{"type":"string"},"host":{"type":"string"},"path":{"type":"string"},"username":{"type":"string"}`),
			Guidance:    guideGitCredential, Capabilities: []string{extension.CapabilityGitCredential}, Sensitive: true,
			Handler: s.gitCredential},
	}
}

const (
	repoProp   = `"repo":{"type":"string","pattern":"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$","description":"owner/repo"}`
	numberProp = `"number":{"type":"integer","minimum":1,"description":"the issue's or pull request's number"}`
)

func schema(required, props string) json.RawMessage {
	return json.RawMessage(`{"type":"object","additionalProperties":false,"required":[` + required + `],"properties":{` + props + `}}`)
}

// decode reads input strictly into v: an unknown member, a wrong type or
// trailing data is invalid_input.
func decode(op string, input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		return refuse(CodeInvalidInput, "the input of %s does not match its schema (see its guidance)", op)
	}
	return nil
}

// repoName checks "owner/repo" and answers it in lower case with its two
// halves.
func repoName(op, repo string) (full, owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || !validOwner(owner) || !validRepo(name) {
		return "", "", "", refuse(CodeInvalidInput, "%s: repo must be owner/repo", op)
	}
	owner, name = strings.ToLower(owner), strings.ToLower(name)
	return owner + "/" + name, owner, name, nil
}

func validOwner(s string) bool {
	if s == "" || len(s) > 39 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func validRepo(s string) bool {
	if s == "" || len(s) > 100 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func needNumber(op string, n int) error {
	if n < 1 {
		return refuse(CodeInvalidInput, "%s: number must be a positive integer", op)
	}
	return nil
}

// call is one operation's work on one repository: the checks every
// operation makes (credentials, the repository's shape, Allow), then fn
// with a client holding the repository's token, and the mapping of what
// fails.
func (s *service) call(ctx context.Context, auth extension.Authority, op, repo string, fn func(c *github.Client, owner, name string) (any, error)) (json.RawMessage, error) {
	full, tok, err := s.token(ctx, auth, op, repo)
	if err != nil {
		return nil, err
	}
	owner, name, _ := strings.Cut(full, "/")
	c, err := newClient(s.base, s.o.HTTPClient, tok.Reveal())
	if err != nil {
		return nil, refuse(CodeNotConfigured, "the GitHub client could not be built")
	}
	out, err := fn(c, owner, name)
	if err != nil {
		if status(err) == 401 {
			s.o.Credentials.Invalidate(full, tok)
		}
		return nil, mapError(err, s.o.Now)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, refuse(CodeBadResponse, "GitHub's answer could not be encoded")
	}
	return raw, nil
}

// token makes the checks every operation makes (the repository's shape,
// credentials, Allow) and answers the repository in lower case with its
// token.
func (s *service) token(ctx context.Context, auth extension.Authority, op, repo string) (string, Token, error) {
	full, _, _, err := repoName(op, repo)
	if err != nil {
		return "", Token{}, err
	}
	if s.o.Credentials == nil {
		return "", Token{}, refuse(CodeNotConfigured, "the GitHub extension has no credential configured")
	}
	if s.o.Allow == nil || !s.o.Allow(auth, full) {
		return "", Token{}, refuse(CodeRepoNotAllowed, "%s: this Work's scope does not allow that repository", op)
	}
	tok, err := s.o.Credentials.Token(ctx, full)
	if err != nil {
		return "", Token{}, mapError(err, s.o.Now)
	}
	return full, tok, nil
}

// Results. Times are RFC 3339 in UTC; absent values are omitted.

// Issue is github.issue.view's result.
type Issue struct {
	Repo              string       `json:"repo"`
	Number            int          `json:"number"`
	Kind              string       `json:"kind"` // "issue" or "pull_request"
	Title             string       `json:"title"`
	State             string       `json:"state"`
	Author            string       `json:"author,omitempty"`
	Body              string       `json:"body"`
	Labels            []string     `json:"labels"`
	Assignees         []string     `json:"assignees"`
	URL               string       `json:"url,omitempty"`
	CreatedAt         string       `json:"created_at,omitempty"`
	UpdatedAt         string       `json:"updated_at,omitempty"`
	Comments          []Comment    `json:"comments"`
	CommentsTruncated bool         `json:"comments_truncated"`
	PullRequest       *PullRequest `json:"pull_request,omitempty"`
}

// Comment is one comment of an issue or pull request.
type Comment struct {
	ID        int64  `json:"id"`
	Author    string `json:"author,omitempty"`
	Body      string `json:"body"`
	CreatedAt string `json:"created_at,omitempty"`
	URL       string `json:"url,omitempty"`
}

// PullRequest is what github.issue.view adds for a pull request.
type PullRequest struct {
	Head              Branch     `json:"head"`
	Base              Branch     `json:"base"`
	Draft             bool       `json:"draft"`
	Merged            bool       `json:"merged"`
	Mergeable         *bool      `json:"mergeable,omitempty"`
	MergeableState    string     `json:"mergeable_state,omitempty"`
	Reviews           []Review   `json:"reviews"`
	ReviewsTruncated  bool       `json:"reviews_truncated"`
	Checks            []CheckRun `json:"checks"`
	ChecksTotal       int        `json:"checks_total"`
	RequestedReviewer []string   `json:"requested_reviewers"`
}

// Branch is a pull request's head or base.
type Branch struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

// Review is one submitted review.
type Review struct {
	ID          int64  `json:"id"`
	Author      string `json:"author,omitempty"`
	State       string `json:"state"`
	Body        string `json:"body"`
	CommitID    string `json:"commit_id,omitempty"`
	SubmittedAt string `json:"submitted_at,omitempty"`
}

// CheckRun is one check run.
type CheckRun struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	Status      string          `json:"status"`
	Conclusion  string          `json:"conclusion,omitempty"`
	HeadSHA     string          `json:"head_sha,omitempty"`
	StartedAt   string          `json:"started_at,omitempty"`
	CompletedAt string          `json:"completed_at,omitempty"`
	URL         string          `json:"url,omitempty"`
	Output      *CheckRunOutput `json:"output,omitempty"`
}

// CheckRunOutput is a check run's report, in github.checks.view only.
type CheckRunOutput struct {
	Title         string `json:"title,omitempty"`
	Summary       string `json:"summary,omitempty"`
	Text          string `json:"text,omitempty"`
	TextTruncated bool   `json:"text_truncated,omitempty"`
}

func stamp(t *github.Timestamp) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func logins(us []*github.User) []string {
	out := []string{}
	for _, u := range us {
		out = append(out, u.GetLogin())
	}
	return out
}

func checkRun(r *github.CheckRun) CheckRun {
	return CheckRun{ID: r.GetID(), Name: r.GetName(), Status: r.GetStatus(), Conclusion: r.GetConclusion(), HeadSHA: r.GetHeadSHA(),
		StartedAt: stamp(r.StartedAt), CompletedAt: stamp(r.CompletedAt), URL: r.GetHTMLURL()}
}

type repoNumber struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
}

func (s *service) issueView(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in repoNumber
	if err := decode(OpIssueView, input, &in); err != nil {
		return nil, err
	}
	if err := needNumber(OpIssueView, in.Number); err != nil {
		return nil, err
	}
	return s.call(ctx, auth, OpIssueView, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		is, _, err := c.Issues.Get(ctx, owner, name, in.Number)
		if err != nil {
			return nil, err
		}
		out := Issue{Repo: owner + "/" + name, Number: is.GetNumber(), Kind: "issue", Title: is.GetTitle(), State: is.GetState(),
			Author: is.GetUser().GetLogin(), Body: is.GetBody(), Labels: []string{}, Assignees: logins(is.Assignees),
			URL: is.GetHTMLURL(), CreatedAt: stamp(is.CreatedAt), UpdatedAt: stamp(is.UpdatedAt), Comments: []Comment{}}
		for _, l := range is.Labels {
			out.Labels = append(out.Labels, l.GetName())
		}
		opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
		for {
			cs, resp, err := c.Issues.ListComments(ctx, owner, name, in.Number, opts)
			if err != nil {
				return nil, err
			}
			for _, cm := range cs {
				if len(out.Comments) == MaxComments {
					out.CommentsTruncated = true
					break
				}
				out.Comments = append(out.Comments, Comment{ID: cm.GetID(), Author: cm.GetUser().GetLogin(), Body: cm.GetBody(), CreatedAt: stamp(cm.CreatedAt), URL: cm.GetHTMLURL()})
			}
			if resp.NextPage == 0 || out.CommentsTruncated {
				break
			}
			if len(out.Comments) == MaxComments {
				out.CommentsTruncated = true
				break
			}
			opts.Page = resp.NextPage
		}
		if is.PullRequestLinks == nil {
			return out, nil
		}
		out.Kind = "pull_request"
		pr, _, err := c.PullRequests.Get(ctx, owner, name, in.Number)
		if err != nil {
			return nil, err
		}
		p := &PullRequest{Head: Branch{Ref: pr.GetHead().GetRef(), SHA: pr.GetHead().GetSHA()}, Base: Branch{Ref: pr.GetBase().GetRef(), SHA: pr.GetBase().GetSHA()},
			Draft: pr.GetDraft(), Merged: pr.GetMerged(), Mergeable: pr.Mergeable, MergeableState: pr.GetMergeableState(),
			Reviews: []Review{}, Checks: []CheckRun{}, RequestedReviewer: logins(pr.RequestedReviewers)}
		rs, resp, err := c.PullRequests.ListReviews(ctx, owner, name, in.Number, &github.ListOptions{PerPage: MaxReviews})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			p.Reviews = append(p.Reviews, Review{ID: r.GetID(), Author: r.GetUser().GetLogin(), State: r.GetState(), Body: r.GetBody(), CommitID: r.GetCommitID(), SubmittedAt: stamp(r.SubmittedAt)})
		}
		p.ReviewsTruncated = resp.NextPage != 0
		if sha := p.Head.SHA; sha != "" {
			runs, _, err := c.Checks.ListCheckRunsForRef(ctx, owner, name, sha, &github.ListCheckRunsOptions{ListOptions: github.ListOptions{PerPage: MaxCheckRuns}})
			if err != nil {
				return nil, err
			}
			for _, r := range runs.CheckRuns {
				p.Checks = append(p.Checks, checkRun(r))
			}
			p.ChecksTotal = runs.GetTotal()
		}
		out.PullRequest = p
		return out, nil
	})
}

func (s *service) issueComment(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		repoNumber
		Body string `json:"body"`
	}
	if err := decode(OpIssueComment, input, &in); err != nil {
		return nil, err
	}
	if err := needNumber(OpIssueComment, in.Number); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Body) == "" {
		return nil, refuse(CodeInvalidInput, "%s: body must not be empty", OpIssueComment)
	}
	marker, err := requestMarker(OpIssueComment, auth)
	if err != nil {
		return nil, err
	}
	return s.call(ctx, auth, OpIssueComment, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		if marker != "" {
			cm, err := findComment(ctx, c, owner, name, in.Number, marker, s.login(ctx, c))
			if err != nil {
				return nil, err
			}
			if cm != nil {
				return replayed(commentResult(cm)), nil
			}
		}
		cm, _, err := c.Issues.CreateComment(ctx, owner, name, in.Number, github.IssueCommentRequest{Body: withMarker(in.Body, marker)})
		if err != nil {
			return nil, err
		}
		return commentResult(cm), nil
	})
}

func commentResult(cm *github.IssueComment) map[string]any {
	return map[string]any{"id": cm.GetID(), "url": cm.GetHTMLURL()}
}

func (s *service) issueEdit(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		repoNumber
		Title     *string   `json:"title"`
		Body      *string   `json:"body"`
		Labels    *[]string `json:"labels"`
		Assignees *[]string `json:"assignees"`
	}
	if err := decode(OpIssueEdit, input, &in); err != nil {
		return nil, err
	}
	if err := needNumber(OpIssueEdit, in.Number); err != nil {
		return nil, err
	}
	if in.Title == nil && in.Body == nil && in.Labels == nil && in.Assignees == nil {
		return nil, refuse(CodeInvalidInput, "%s: name at least one of title, body, labels and assignees", OpIssueEdit)
	}
	if in.Title != nil && strings.TrimSpace(*in.Title) == "" {
		return nil, refuse(CodeInvalidInput, "%s: title must not be empty", OpIssueEdit)
	}
	req := github.UpdateIssueRequest{Title: in.Title, Body: in.Body}
	if in.Labels != nil {
		req.Labels = append([]string{}, *in.Labels...)
	}
	if in.Assignees != nil {
		req.Assignees = append([]string{}, *in.Assignees...)
	}
	return s.call(ctx, auth, OpIssueEdit, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		is, _, err := c.Issues.Update(ctx, owner, name, in.Number, req)
		if err != nil {
			return nil, err
		}
		labels := []string{}
		for _, l := range is.Labels {
			labels = append(labels, l.GetName())
		}
		return map[string]any{"number": is.GetNumber(), "title": is.GetTitle(), "labels": labels, "assignees": logins(is.Assignees), "url": is.GetHTMLURL()}, nil
	})
}

func (s *service) prCreate(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Repo  string  `json:"repo"`
		Title string  `json:"title"`
		Body  *string `json:"body"`
		Head  string  `json:"head"`
		Base  string  `json:"base"`
		Draft *bool   `json:"draft"`
	}
	if err := decode(OpPRCreate, input, &in); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Title) == "" || in.Head == "" || in.Base == "" {
		return nil, refuse(CodeInvalidInput, "%s: title, head and base are required", OpPRCreate)
	}
	marker, err := requestMarker(OpPRCreate, auth)
	if err != nil {
		return nil, err
	}
	body := withMarkerPtr(in.Body, marker)
	return s.call(ctx, auth, OpPRCreate, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		if marker != "" {
			pr, err := findPull(ctx, c, owner, name, in.Head, in.Base, marker, s.login(ctx, c))
			if err != nil {
				return nil, err
			}
			if pr != nil {
				return replayed(pullResult(pr)), nil
			}
		}
		pr, _, err := c.PullRequests.Create(ctx, owner, name, github.CreatePullRequest{Title: &in.Title, Body: body, Head: in.Head, Base: in.Base, Draft: in.Draft})
		if err != nil {
			return nil, err
		}
		return pullResult(pr), nil
	})
}

func pullResult(pr *github.PullRequest) map[string]any {
	return map[string]any{"number": pr.GetNumber(), "url": pr.GetHTMLURL(), "head": pr.GetHead().GetRef(), "base": pr.GetBase().GetRef(), "draft": pr.GetDraft()}
}

func (s *service) reviewRequest(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		repoNumber
		Reviewers     []string `json:"reviewers"`
		TeamReviewers []string `json:"team_reviewers"`
	}
	if err := decode(OpReviewRequest, input, &in); err != nil {
		return nil, err
	}
	if err := needNumber(OpReviewRequest, in.Number); err != nil {
		return nil, err
	}
	if len(in.Reviewers)+len(in.TeamReviewers) == 0 {
		return nil, refuse(CodeInvalidInput, "%s: name at least one reviewer or team", OpReviewRequest)
	}
	return s.call(ctx, auth, OpReviewRequest, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		pr, _, err := c.PullRequests.RequestReviewers(ctx, owner, name, in.Number, github.ReviewersRequest{Reviewers: in.Reviewers, TeamReviewers: in.TeamReviewers})
		if err != nil {
			return nil, err
		}
		teams := []string{}
		for _, t := range pr.RequestedTeams {
			teams = append(teams, t.GetSlug())
		}
		return map[string]any{"number": pr.GetNumber(), "requested_reviewers": logins(pr.RequestedReviewers), "requested_teams": teams}, nil
	})
}

func (s *service) review(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		repoNumber
		Event    string  `json:"event"`
		Body     *string `json:"body"`
		CommitID *string `json:"commit_id"`
	}
	if err := decode(OpReview, input, &in); err != nil {
		return nil, err
	}
	if err := needNumber(OpReview, in.Number); err != nil {
		return nil, err
	}
	event := map[string]string{"approve": "APPROVE", "request_changes": "REQUEST_CHANGES", "comment": "COMMENT"}[in.Event]
	if event == "" {
		return nil, refuse(CodeInvalidInput, "%s: event must be approve, request_changes or comment", OpReview)
	}
	if event != "APPROVE" && (in.Body == nil || strings.TrimSpace(*in.Body) == "") {
		return nil, refuse(CodeInvalidInput, "%s: a body is required to request changes or comment", OpReview)
	}
	marker, err := requestMarker(OpReview, auth)
	if err != nil {
		return nil, err
	}
	body := withMarkerPtr(in.Body, marker)
	return s.call(ctx, auth, OpReview, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		if marker != "" {
			r, err := findReview(ctx, c, owner, name, in.Number, marker, s.login(ctx, c))
			if err != nil {
				return nil, err
			}
			if r != nil {
				return replayed(reviewResult(r)), nil
			}
		}
		r, _, err := c.PullRequests.CreateReview(ctx, owner, name, in.Number, &github.PullRequestReviewRequest{Event: &event, Body: body, CommitID: in.CommitID})
		if err != nil {
			return nil, err
		}
		return reviewResult(r), nil
	})
}

func reviewResult(r *github.PullRequestReview) map[string]any {
	return map[string]any{"id": r.GetID(), "state": r.GetState(), "url": r.GetHTMLURL()}
}

func (s *service) repoFile(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Repo     string `json:"repo"`
		Path     string `json:"path"`
		Ref      string `json:"ref"`
		MaxBytes *int   `json:"max_bytes"`
	}
	if err := decode(OpRepoFile, input, &in); err != nil {
		return nil, err
	}
	path := strings.Trim(in.Path, "/")
	if path == "" || strings.Contains("/"+path+"/", "/../") || strings.Contains("/"+path+"/", "/./") {
		return nil, refuse(CodeInvalidInput, "%s: path must name a file from the repository's root", OpRepoFile)
	}
	limit := DefaultFileBytes
	if in.MaxBytes != nil {
		if *in.MaxBytes < 1 || *in.MaxBytes > MaxFileBytes {
			return nil, refuse(CodeInvalidInput, "%s: max_bytes must be 1 to %d", OpRepoFile, MaxFileBytes)
		}
		limit = *in.MaxBytes
	}
	return s.call(ctx, auth, OpRepoFile, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		f, _, _, err := c.Repositories.GetContents(ctx, owner, name, path, &github.RepositoryContentGetOptions{Ref: in.Ref})
		if err != nil {
			return nil, err
		}
		if f == nil || f.GetType() != "file" {
			return nil, refuse(CodeNotAFile, "%s: the path is not a file (a directory, symlink or submodule)", OpRepoFile)
		}
		if f.GetSize() > limit {
			return nil, refuse(CodeFileTooLarge, "%s: the file has %d bytes, more than the bound of %d", OpRepoFile, f.GetSize(), limit)
		}
		content, err := f.GetContent()
		if err != nil {
			return nil, refuse(CodeBadResponse, "%s: GitHub's answer holds no readable content", OpRepoFile)
		}
		if len(content) > limit {
			return nil, refuse(CodeFileTooLarge, "%s: the file has %d bytes, more than the bound of %d", OpRepoFile, len(content), limit)
		}
		out := map[string]any{"path": f.GetPath(), "sha": f.GetSHA(), "size": len(content), "encoding": "utf-8", "content": content}
		if in.Ref != "" {
			out["ref"] = in.Ref
		}
		if !utf8.ValidString(content) {
			out["encoding"], out["content"] = "base64", base64Std(content)
		}
		return out, nil
	})
}

func (s *service) checksList(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Repo   string `json:"repo"`
		Ref    string `json:"ref"`
		Number int    `json:"number"`
	}
	if err := decode(OpChecksList, input, &in); err != nil {
		return nil, err
	}
	if (in.Ref == "") == (in.Number == 0) || in.Number < 0 {
		return nil, refuse(CodeInvalidInput, "%s: name exactly one of ref and number", OpChecksList)
	}
	return s.call(ctx, auth, OpChecksList, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		ref := in.Ref
		if in.Number > 0 {
			pr, _, err := c.PullRequests.Get(ctx, owner, name, in.Number)
			if err != nil {
				return nil, err
			}
			ref = pr.GetHead().GetSHA()
		}
		runs, _, err := c.Checks.ListCheckRunsForRef(ctx, owner, name, ref, &github.ListCheckRunsOptions{ListOptions: github.ListOptions{PerPage: MaxCheckRuns}})
		if err != nil {
			return nil, err
		}
		out := struct {
			Ref       string     `json:"ref"`
			Total     int        `json:"total"`
			CheckRuns []CheckRun `json:"check_runs"`
		}{Ref: ref, Total: runs.GetTotal(), CheckRuns: []CheckRun{}}
		for _, r := range runs.CheckRuns {
			out.CheckRuns = append(out.CheckRuns, checkRun(r))
		}
		return out, nil
	})
}

func (s *service) checksView(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Repo string `json:"repo"`
		ID   int64  `json:"id"`
	}
	if err := decode(OpChecksView, input, &in); err != nil {
		return nil, err
	}
	if in.ID < 1 {
		return nil, refuse(CodeInvalidInput, "%s: id must be a positive integer", OpChecksView)
	}
	return s.call(ctx, auth, OpChecksView, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		r, _, err := c.Checks.GetCheckRun(ctx, owner, name, in.ID)
		if err != nil {
			return nil, err
		}
		out := checkRun(r)
		if o := r.Output; o != nil {
			text := o.GetText()
			cut := len(text) > MaxCheckText
			if cut {
				text = truncateUTF8(text, MaxCheckText)
			}
			out.Output = &CheckRunOutput{Title: o.GetTitle(), Summary: truncateUTF8(o.GetSummary(), MaxCheckText), Text: text, TextTruncated: cut}
		}
		return out, nil
	})
}

func (s *service) prMerge(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		repoNumber
		Method        string  `json:"method"`
		SHA           string  `json:"sha"`
		CommitTitle   string  `json:"commit_title"`
		CommitMessage *string `json:"commit_message"`
	}
	if err := decode(OpPRMerge, input, &in); err != nil {
		return nil, err
	}
	if err := needNumber(OpPRMerge, in.Number); err != nil {
		return nil, err
	}
	switch in.Method {
	case "", "merge", "squash", "rebase":
	default:
		return nil, refuse(CodeInvalidInput, "%s: method must be merge, squash or rebase", OpPRMerge)
	}
	return s.call(ctx, auth, OpPRMerge, in.Repo, func(c *github.Client, owner, name string) (any, error) {
		msg := ""
		if in.CommitMessage != nil {
			msg = *in.CommitMessage
		}
		r, _, err := c.PullRequests.Merge(ctx, owner, name, in.Number, msg, &github.PullRequestOptions{MergeMethod: in.Method, SHA: in.SHA, CommitTitle: in.CommitTitle})
		if err != nil {
			if status(err) == 405 && auth.RequestID != "" {
				// Run again after a merge whose answer was lost: the pull
				// request is merged, at the head the caller named.
				pr, _, gerr := c.PullRequests.Get(ctx, owner, name, in.Number)
				if gerr == nil && pr.GetMerged() && (in.SHA == "" || in.SHA == pr.GetHead().GetSHA()) {
					return map[string]any{"merged": true, "sha": pr.GetMergeCommitSHA(), "replayed": true}, nil
				}
			}
			if status(err) == 405 {
				return nil, refuse(CodeNotMergeable, "%s: GitHub says the pull request cannot be merged as it is (405)", OpPRMerge)
			}
			return nil, err
		}
		return map[string]any{"merged": r.GetMerged(), "sha": r.GetSHA()}, nil
	})
}

// gitCredential answers git's credential request for this GitHub's git
// host with a token for one repository: the one git's path names, or the
// Work's own (WorkRepository) when git sends no path. The result is
// {"username": "x-access-token", "password": <token>}, the shape os
// git-credential prints for git.
func (s *service) gitCredential(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in api.GitCredentialInput
	if err := decode(OpGitCredential, input, &in); err != nil {
		return nil, err
	}
	if !strings.EqualFold(in.Host, s.gitHost) {
		return nil, refuse(CodeWrongHost, "%s answers only for this GitHub's git host", OpGitCredential)
	}
	if in.Protocol != "https" && !(in.Protocol == "http" && s.scheme == "http") {
		return nil, refuse(CodeWrongHost, "%s answers only over https", OpGitCredential)
	}
	repo := strings.TrimSuffix(strings.Trim(in.Path, "/"), ".git")
	if repo == "" && s.o.WorkRepository != nil {
		if r, ok := s.o.WorkRepository(auth); ok {
			repo = r
		}
	}
	if repo == "" {
		return nil, refuse(CodeRepositoryUnknown, "%s: git sent no path and the Work names no repository; run git config credential.useHttpPath true", OpGitCredential)
	}
	if strings.Count(repo, "/") != 1 {
		return nil, refuse(CodeRepositoryUnknown, "%s: git's path does not name owner/repo", OpGitCredential)
	}
	_, tok, err := s.token(ctx, auth, OpGitCredential, repo)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"username": "x-access-token", "password": tok.Reveal()})
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// truncateUTF8 cuts s to at most n bytes, never inside a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
