package github

import (
	"encoding/json"
	"github.com/open-conduit/open-conduit/extension"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Bounds of an Event's data: a delivery's payload can be megabytes, its
// Event is a small, documented subset.
const (
	maxTitleBytes   = 256
	maxBodyBytes    = 4096
	maxMessageBytes = 1024
	maxListItems    = 20
)

// Reasons a verified delivery is dropped (answered 202, counted).
const (
	reasonEventUnsupported = "event_unsupported"
	reasonPayloadInvalid   = "payload_invalid"
	reasonUnclaimed        = "unclaimed"
	// The host's drops of what Accept refuses.
	reasonScopeUnavailable = extension.WebhookScopeUnavailable
	reasonEventRefused     = extension.WebhookEventRefused
)

// EventPrefix is the family of every Event the ingress accepts.
const EventPrefix = "github."

// Supported are the X-GitHub-Event names the ingress maps; any other is
// answered 202 and dropped (event_unsupported).
var Supported = []string{
	"check_run", "check_suite", "issue_comment", "issues", "ping",
	"pull_request", "pull_request_review", "pull_request_review_comment", "push",
}

var actionRule = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// mapped is a delivery turned into an Event, before its scope is known.
type mapped struct {
	Type         string
	Key          string
	Repository   string // owner/repo, "" when the payload has none
	Installation int64
	Data         map[string]any
}

// Shapes of the payload members the mapping reads. GitHub sends far more;
// encoding/json ignores the rest.
type (
	user  struct{ Login string }
	label struct{ Name string }
	team  struct{ Slug string }
	repo  struct {
		FullName string `json:"full_name"`
	}
	issue struct {
		Number      int64
		Title       string
		State       string
		HTMLURL     string `json:"html_url"`
		User        user
		Labels      []label
		Assignees   []user
		Body        string
		PullRequest *struct{} `json:"pull_request"`
	}
	ref struct {
		Ref string
		SHA string
	}
	pullRequest struct {
		Number             int64
		Title              string
		State              string
		Draft              bool
		Merged             bool
		HTMLURL            string `json:"html_url"`
		User               user
		Head               ref
		Base               ref
		Body               string
		Labels             []label
		RequestedReviewers []user `json:"requested_reviewers"`
	}
	comment struct {
		ID      int64
		User    user
		Body    string
		Path    string
		HTMLURL string `json:"html_url"`
	}
	review struct {
		ID       int64
		State    string
		User     user
		Body     string
		HTMLURL  string `json:"html_url"`
		CommitID string `json:"commit_id"`
	}
	prRef  struct{ Number int64 }
	app    struct{ Slug string }
	checks struct {
		ID           int64
		Name         string
		Status       string
		Conclusion   string
		HeadBranch   string `json:"head_branch"`
		HeadSHA      string `json:"head_sha"`
		HTMLURL      string `json:"html_url"`
		App          app
		PullRequests []prRef `json:"pull_requests"`
	}
	commit struct {
		ID      string
		Message string
	}
	payload struct {
		Action       string
		Repository   *repo
		Installation *struct{ ID int64 }
		Sender       user
		Issue        *issue
		PullRequest  *pullRequest `json:"pull_request"`
		Comment      *comment
		Review       *review
		CheckSuite   *checks `json:"check_suite"`
		CheckRun     *checks `json:"check_run"`
		Label        *label
		Assignee     *user
		RequestedRev *user `json:"requested_reviewer"`
		RequestedTm  *team `json:"requested_team"`
		// push
		Ref        string
		Before     string
		After      string
		Created    bool
		Deleted    bool
		Forced     bool
		Pusher     struct{ Name string }
		Commits    []json.RawMessage
		HeadCommit *commit `json:"head_commit"`
		// ping
		Zen    string
		HookID int64 `json:"hook_id"`
	}
)

// mapDelivery maps a verified delivery of event with body to an Event, or
// says why it is dropped.
func mapDelivery(event string, body []byte) (mapped, string) {
	supported := false
	for _, s := range Supported {
		supported = supported || s == event
	}
	if !supported {
		return mapped{}, reasonEventUnsupported
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return mapped{}, reasonPayloadInvalid
	}
	typ := EventPrefix + event
	if p.Action != "" {
		if !actionRule.MatchString(p.Action) {
			return mapped{}, reasonEventUnsupported
		}
		typ += "." + p.Action
	}
	m := mapped{Type: typ, Data: map[string]any{"event": event}}
	if p.Action != "" {
		m.Data["action"] = p.Action
	}
	if p.Repository != nil && p.Repository.FullName != "" {
		m.Repository = p.Repository.FullName
		m.Data["repository"] = p.Repository.FullName
	}
	if p.Installation != nil && p.Installation.ID > 0 {
		m.Installation = p.Installation.ID
		m.Data["installation"] = p.Installation.ID
	}
	if p.Sender.Login != "" {
		m.Data["sender"] = p.Sender.Login
	}
	numbered := func(n int64) {
		if m.Repository != "" && n > 0 {
			m.Key = m.Repository + "#" + strconv.FormatInt(n, 10)
		}
	}
	switch event {
	case "ping":
		m.Data["zen"] = clip(p.Zen, maxTitleBytes, m.Data, "zen")
		m.Data["hook_id"] = p.HookID
		m.Key = m.Repository
	case "push":
		m.Data["ref"], m.Data["before"], m.Data["after"] = p.Ref, p.Before, p.After
		m.Data["created"], m.Data["deleted"], m.Data["forced"] = p.Created, p.Deleted, p.Forced
		m.Data["pusher"] = p.Pusher.Name
		m.Data["commits"] = len(p.Commits)
		if p.HeadCommit != nil {
			hc := map[string]any{"id": p.HeadCommit.ID}
			hc["message"] = clip(p.HeadCommit.Message, maxMessageBytes, hc, "message")
			m.Data["head_commit"] = hc
		}
		if m.Repository != "" && p.Ref != "" {
			m.Key = m.Repository + "@" + p.Ref
		}
	case "issues", "issue_comment":
		if p.Issue == nil {
			return mapped{}, reasonPayloadInvalid
		}
		m.Data["issue"] = issueData(p.Issue, event == "issues")
		numbered(p.Issue.Number)
		if event == "issue_comment" && p.Comment != nil {
			m.Data["comment"] = commentData(p.Comment)
		}
		if p.Label != nil {
			m.Data["label"] = p.Label.Name
		}
		if p.Assignee != nil {
			m.Data["assignee"] = p.Assignee.Login
		}
	case "pull_request", "pull_request_review", "pull_request_review_comment":
		if p.PullRequest == nil {
			return mapped{}, reasonPayloadInvalid
		}
		m.Data["pull_request"] = pullData(p.PullRequest, event == "pull_request")
		numbered(p.PullRequest.Number)
		switch {
		case event == "pull_request_review" && p.Review != nil:
			r := map[string]any{"id": p.Review.ID, "state": p.Review.State, "author": p.Review.User.Login, "url": p.Review.HTMLURL, "commit": p.Review.CommitID}
			r["body"] = clip(p.Review.Body, maxBodyBytes, r, "body")
			m.Data["review"] = r
		case event == "pull_request_review_comment" && p.Comment != nil:
			m.Data["comment"] = commentData(p.Comment)
		}
		if p.RequestedRev != nil {
			m.Data["requested_reviewer"] = p.RequestedRev.Login
		}
		if p.RequestedTm != nil {
			m.Data["requested_team"] = p.RequestedTm.Slug
		}
		if p.Label != nil {
			m.Data["label"] = p.Label.Name
		}
	case "check_suite", "check_run":
		c := p.CheckSuite
		if event == "check_run" {
			c = p.CheckRun
		}
		if c == nil {
			return mapped{}, reasonPayloadInvalid
		}
		d := map[string]any{"id": c.ID, "status": c.Status, "conclusion": c.Conclusion, "head_sha": c.HeadSHA, "app": c.App.Slug}
		if event == "check_run" {
			d["name"] = clip(c.Name, maxTitleBytes, d, "name")
			d["url"] = c.HTMLURL
		} else {
			d["head_branch"] = c.HeadBranch
		}
		prs := []int64{}
		for _, pr := range c.PullRequests {
			if len(prs) < maxListItems {
				prs = append(prs, pr.Number)
			}
		}
		d["pull_requests"] = prs
		m.Data[event] = d
		if len(prs) > 0 {
			numbered(prs[0])
		} else if m.Repository != "" && c.HeadSHA != "" {
			m.Key = m.Repository + "@" + c.HeadSHA
		}
	}
	return m, ""
}

func issueData(is *issue, full bool) map[string]any {
	d := map[string]any{"number": is.Number, "state": is.State, "url": is.HTMLURL, "author": is.User.Login, "pull_request": is.PullRequest != nil}
	d["title"] = clip(is.Title, maxTitleBytes, d, "title")
	if full {
		d["body"] = clip(is.Body, maxBodyBytes, d, "body")
		d["labels"] = labelNames(is.Labels)
		d["assignees"] = logins(is.Assignees)
	}
	return d
}

func pullData(pr *pullRequest, full bool) map[string]any {
	d := map[string]any{"number": pr.Number, "state": pr.State, "draft": pr.Draft, "merged": pr.Merged, "url": pr.HTMLURL,
		"author": pr.User.Login, "head": map[string]any{"ref": pr.Head.Ref, "sha": pr.Head.SHA}, "base": map[string]any{"ref": pr.Base.Ref}}
	d["title"] = clip(pr.Title, maxTitleBytes, d, "title")
	if full {
		d["body"] = clip(pr.Body, maxBodyBytes, d, "body")
		d["labels"] = labelNames(pr.Labels)
		d["requested_reviewers"] = logins(pr.RequestedReviewers)
	}
	return d
}

func commentData(c *comment) map[string]any {
	d := map[string]any{"id": c.ID, "author": c.User.Login, "url": c.HTMLURL}
	if c.Path != "" {
		d["path"] = c.Path
	}
	d["body"] = clip(c.Body, maxBodyBytes, d, "body")
	return d
}

func labelNames(ls []label) []string {
	out := []string{}
	for _, l := range ls {
		if len(out) < maxListItems {
			out = append(out, l.Name)
		}
	}
	return out
}

func logins(us []user) []string {
	out := []string{}
	for _, u := range us {
		if len(out) < maxListItems {
			out = append(out, u.Login)
		}
	}
	return out
}

// clip bounds s to at most max bytes, cut at a character boundary; when it
// cuts, it sets <name>_truncated in d.
func clip(s string, max int, d map[string]any, name string) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	d[name+"_truncated"] = true
	return s[:cut]
}
