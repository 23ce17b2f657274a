package github

import (
	"strings"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/github/ghapi"
)

// Since is the version the toolsets' first members joined in.
const Since = "0.1.0"

// The toolsets: config grants them as @github.author, @github.reviewer
// and @github.reader. A toolset only gains members from one release to the
// next; github.pr.merge is in none of them (grant it by name).
const (
	ToolsetAuthor   = "github.author"
	ToolsetReviewer = "github.reviewer"
	ToolsetReader   = "github.reader"
)

var (
	readerOps   = []string{"read_context", ghapi.OpIssueView, ghapi.OpRepoFile, ghapi.OpChecksList, ghapi.OpChecksView}
	reviewerOps = append(append([]string{}, readerOps...), ghapi.OpIssueComment, ghapi.OpReview, OpWaitChecks, OpWaitComment, OpWaitClosed, OpReport, "wait", "declare_outcome")
	authorOps   = append(append([]string{}, readerOps...), ghapi.OpIssueComment, ghapi.OpIssueEdit, ghapi.OpGitCredential, ghapi.OpPRCreate, ghapi.OpReviewRequest,
		OpWaitChecks, OpWaitReview, OpWaitComment, OpWaitClosed, OpReport, "wait", "declare_outcome")
)

func toolset(name string, ops []string) extension.Toolset {
	t := extension.Toolset{Name: name}
	for _, op := range ops {
		t.Operations = append(t.Operations, extension.ToolsetOperation{Name: op, Since: Since})
	}
	return t
}

// Toolsets are the extension's roles.
func (*Extension) Toolsets() []extension.Toolset {
	return []extension.Toolset{toolset(ToolsetAuthor, authorOps), toolset(ToolsetReviewer, reviewerOps), toolset(ToolsetReader, readerOps)}
}

// The playbooks of the two roles.
const (
	PlaybookAuthor   = "github-author"
	PlaybookReviewer = "github-reviewer"
)

// Playbooks are the skills of the author and the reviewer; each declares
// the operations it uses, so the grant warnings and config_drift know
// them.
func (*Extension) Playbooks() []extension.Playbook {
	return []extension.Playbook{
		{Name: PlaybookAuthor, Markdown: frontmatter(PlaybookAuthor, "Work a GitHub issue to a pull request.", authorPlaybookOps) + authorPlaybook},
		{Name: PlaybookReviewer, Markdown: frontmatter(PlaybookReviewer, "Review a GitHub pull request.", reviewerPlaybookOps) + reviewerPlaybook},
	}
}

var (
	authorPlaybookOps = []string{"read_context", ghapi.OpIssueView, ghapi.OpRepoFile, ghapi.OpIssueComment, ghapi.OpGitCredential, ghapi.OpPRCreate,
		ghapi.OpChecksList, ghapi.OpChecksView, OpWaitChecks, OpWaitReview, OpReport, "declare_outcome"}
	reviewerPlaybookOps = []string{"read_context", ghapi.OpIssueView, ghapi.OpRepoFile, ghapi.OpChecksList, ghapi.OpChecksView, ghapi.OpIssueComment,
		ghapi.OpReview, OpWaitChecks, "declare_outcome"}
)

func frontmatter(name, description string, ops []string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\noperations: [" + strings.Join(ops, ", ") + "]\n---\n"
}

const authorPlaybook = `
# Working a GitHub issue

You were started on a GitHub Event; read it first with read_context: its
correlation key is owner/repo#N, the issue you work on.

1. Read the issue with github.issue.view (its comments too) and the files you
   need with github.repo.file, or clone the repository with git. Git gets its
   credential from ` + "`os git-credential`" + ` (git config credential.helper
   '!os git-credential' and credential.useHttpPath true).
2. If something is unclear, ask on the issue with github.issue.comment and
   wait for the answer with github.wait.comment.
3. Make the change on a new branch, commit, and push it with git.
4. Open a pull request with github.pr.create; say "Fixes #N" in its body.
   Report it with github.report (state progress, the PR's url).
5. Wait for its checks with github.wait.checks. When you wake, read them with
   github.checks.list; a failure's details are in github.checks.view. Fix,
   push, and wait again.
6. When the checks pass, wait for a review with github.wait.review, and
   address what it asks.
7. End with declare_outcome: succeeded once the pull request is ready,
   failed (with the reason) if you cannot finish. Report blocked or done
   with github.report.

A refusal github_repo_not_allowed means the repository is outside this
Work's scope: do not retry, say so in your outcome.
`

const reviewerPlaybook = `
# Reviewing a GitHub pull request

You were started on a GitHub Event; read it first with read_context: its
correlation key is owner/repo#N, the pull request to review.

1. Read the pull request with github.issue.view: its description, comments,
   earlier reviews and the check runs of its head.
2. Read the changed files at its head with github.repo.file (ref: the head
   SHA). If the checks are still running, wait for them with
   github.wait.checks, then read them with github.checks.list and
   github.checks.view.
3. Submit one review with github.pr.review: approve, or request_changes with
   concrete requests, passing commit_id, the head SHA you reviewed. Answer
   questions with github.issue.comment.
4. End with declare_outcome: succeeded with what you decided.

You never merge: merging is not yours to do.
`
