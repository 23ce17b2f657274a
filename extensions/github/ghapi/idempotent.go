package ghapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v93/github"

	"github.com/open-conduit/open-conduit/extension"
)

// Idempotency on the request ID. The host runs a Handler again with the
// same request ID when a crash left the call's record unfinished, so each
// operation that creates something on GitHub (a comment, a pull request,
// a review) marks what it creates with the call's execution and request
// ID, in an HTML comment at the end of its body that GitHub keeps verbatim
// and a reader of the rendered page does not see, and first looks for
// something already carrying that mark. The mark is keyed like the host's
// request record: by the execution and the request ID, so another
// execution (a later attempt) using the same request ID creates anew, as
// the host treats it as a new request.
//
// Only what the credential's own account created counts: a comment, review
// or pull request carrying the mark but written by anyone else is passed
// over, so nobody who can comment on a repository can make an operation
// believe its comment exists and skip it. The account is learned once per
// credential (see identity); while it is not known, no mark is trusted and
// the operation creates anew, since a duplicate after a crash is the
// lesser harm.
//
// Edits (github.issue.edit), review requests (github.pr.review_request)
// set a state and come out the same when run again; github.pr.merge run
// again on a pull request already merged answers it merged.

// MaxMarkedRequestID bounds the request ID an operation marks what it
// creates with (the host's own bound on request IDs).
const MaxMarkedRequestID = 200

// DedupeRecent bounds the comments of an issue, or the reviews of a pull
// request, read to find what an earlier run of the same request created:
// the 300 most recent (read in pages of 100 from the last back), and the
// first 100 (read to learn where the last page is). Pull requests are
// looked for among the 100 newest from the same head into the same base,
// open or closed.
const DedupeRecent = 300

const markerPrefix = "<!-- open-conduit:request="

// requestMarker is the HTML comment what auth's call creates carries: ""
// when the call has no request ID. Every byte of the execution and the
// request ID outside [A-Za-z0-9._~-] is written %XX, so the mark never
// closes the comment early (no >, !, < or space), never spans a line and
// maps one request to one mark.
func requestMarker(op string, auth extension.Authority) (string, error) {
	if auth.RequestID == "" {
		return "", nil
	}
	if len(auth.RequestID) > MaxMarkedRequestID || len(auth.Execution) > MaxMarkedRequestID {
		return "", refuse(CodeInvalidInput, "%s: the request ID is longer than %d bytes", op, MaxMarkedRequestID)
	}
	return markerPrefix + escapeMark(auth.Execution) + "/" + escapeMark(auth.RequestID) + " -->", nil
}

func escapeMark(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// withMarker appends marker to body on a line of its own, after a blank
// line so Markdown reads it as an HTML block of its own; body unchanged
// when marker is "".
func withMarker(body, marker string) string {
	if marker == "" {
		return body
	}
	if strings.TrimSpace(body) == "" {
		return marker
	}
	return strings.TrimRight(body, "\r\n") + "\n\n" + marker
}

// withMarkerPtr is withMarker of an optional body: body as given when
// marker is "", else the marked body (the marker alone for none).
func withMarkerPtr(body *string, marker string) *string {
	if marker == "" {
		return body
	}
	b := ""
	if body != nil {
		b = *body
	}
	return github.Ptr(withMarker(b, marker))
}

// replayed marks a result as the answer of what an earlier run of the
// same request created.
func replayed(res map[string]any) map[string]any {
	res["replayed"] = true
	return res
}

// carries reports whether what author wrote, with body, is what the
// request marked by marker created: the mark is in it and author is the
// credential's own account, login (never when login is not known).
func carries(author, login, body, marker string) bool {
	return marker != "" && login != "" && strings.EqualFold(author, login) && strings.Contains(body, marker)
}

// scanRecent reads page 1 of a list GitHub answers oldest first, in pages
// of 100, then its pages from the last back until DedupeRecent items were
// read there, until found says a page held what is looked for.
func scanRecent(fetch func(page int) (found bool, n int, resp *github.Response, err error)) error {
	found, _, resp, err := fetch(1)
	if err != nil || found {
		return err
	}
	seen := 0
	for p := resp.LastPage; p >= 2 && seen < DedupeRecent; p-- {
		found, n, _, err := fetch(p)
		if err != nil || found {
			return err
		}
		seen += n
	}
	return nil
}

// findComment answers the comment of the issue that carries marker and
// that the credential's account wrote (nil when none of the recent ones
// does, or login is not known).
func findComment(ctx context.Context, c *github.Client, owner, name string, number int, marker, login string) (*github.IssueComment, error) {
	if login == "" {
		return nil, nil
	}
	var hit *github.IssueComment
	err := scanRecent(func(page int) (bool, int, *github.Response, error) {
		cs, resp, err := c.Issues.ListComments(ctx, owner, name, number, &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100, Page: page}})
		if err != nil {
			return false, 0, nil, err
		}
		for _, cm := range cs {
			if carries(cm.GetUser().GetLogin(), login, cm.GetBody(), marker) {
				hit = cm
				return true, len(cs), resp, nil
			}
		}
		return false, len(cs), resp, nil
	})
	return hit, err
}

// findReview answers the review of the pull request that carries marker
// and that the credential's account wrote (nil when none of the recent ones
// does, or login is not known).
func findReview(ctx context.Context, c *github.Client, owner, name string, number int, marker, login string) (*github.PullRequestReview, error) {
	if login == "" {
		return nil, nil
	}
	var hit *github.PullRequestReview
	err := scanRecent(func(page int) (bool, int, *github.Response, error) {
		rs, resp, err := c.PullRequests.ListReviews(ctx, owner, name, number, &github.ListOptions{PerPage: 100, Page: page})
		if err != nil {
			return false, 0, nil, err
		}
		for _, r := range rs {
			if carries(r.GetUser().GetLogin(), login, r.GetBody(), marker) {
				hit = r
				return true, len(rs), resp, nil
			}
		}
		return false, len(rs), resp, nil
	})
	return hit, err
}

// findPull answers the pull request from head into base that carries
// marker and that the credential's account opened, among the 100 newest,
// open or closed (nil when none does, or login is not known). A
// head without an owner is the repository owner's branch, which is how
// GitHub's filter wants it named (owner:branch).
func findPull(ctx context.Context, c *github.Client, owner, name, head, base, marker, login string) (*github.PullRequest, error) {
	if login == "" {
		return nil, nil
	}
	if !strings.Contains(head, ":") {
		head = owner + ":" + head
	}
	prs, _, err := c.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{State: "all", Head: head, Base: base, ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return nil, err
	}
	for _, pr := range prs {
		if carries(pr.GetUser().GetLogin(), login, pr.GetBody(), marker) {
			return pr, nil
		}
	}
	return nil, nil
}
