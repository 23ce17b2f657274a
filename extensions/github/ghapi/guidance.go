package ghapi

// Guidance of each operation, written for a coding agent: when to use it,
// what it answers, and what its refusals mean. Every refusal is 422 with a
// code; github_repo_not_allowed means the Work's scope does not cover the
// repository (ask the operator, do not retry), github_rate_limited says
// when to try again, github_unavailable may be retried later.

const guideIssueView = "Read an issue or a pull request before working on it. " +
	"Input `{\"repo\": \"owner/repo\", \"number\": 123}`. " +
	"Answers its title, state, author, body, labels, assignees and comments (oldest first; at most 300, `comments_truncated` when there are more). " +
	"When `kind` is `pull_request`, `pull_request` adds its head and base branches (with SHAs), draft and merged state, requested reviewers, " +
	"submitted reviews and the check runs of its head (`checks`; `checks_total` counts them all). " +
	"Read it again after a wait: it is GitHub's state now, never a cached copy."

const guideIssueComment = "Post a comment on an issue or pull request, to report progress, ask a question or answer a reviewer. " +
	"Input `{\"repo\": \"owner/repo\", \"number\": 123, \"body\": \"Markdown\"}`; answers the new comment's `id` and `url`. " +
	"Each call posts a new comment: do not repeat a call that succeeded. " +
	"With a request ID, the comment is marked with it (an HTML comment at its end, unseen on GitHub) and a call run again with the same ID " +
	"answers the comment it posted (`replayed`) instead of posting twice."

const guideIssueEdit = "Change an issue or pull request: `title`, `body`, `labels`, `assignees` (name at least one). " +
	"`labels` and `assignees` are the whole new set and replace the current one (`[]` clears it); read the issue first " +
	"with github.issue.view and send the full list you want. Answers the number, title, labels and assignees as they now are."

const guidePRCreate = "Open a pull request once your branch is pushed (push with git, which gets its credential through `os git-credential`). " +
	"Input `{\"repo\", \"title\", \"head\": \"my-branch\", \"base\": \"main\", \"body\"?, \"draft\"?}`; answers its `number` and `url`. " +
	"Mention the issue it resolves in the body (`Fixes #123`). github_validation_failed usually means the branch was not pushed, " +
	"has no commits beyond base, or a pull request for it already exists. " +
	"With a request ID, a call run again with the same ID answers the pull request it opened (`replayed`)."

const guideReviewRequest = "Ask for reviews of a pull request: `reviewers` (logins) and/or `team_reviewers` (team slugs). " +
	"Answers who is now requested. The author of the pull request cannot be requested."

const guideReview = "Submit your review of a pull request after reading it (github.issue.view, github.repo.file at its head). " +
	"`event` is `approve`, `request_changes` or `comment`; `body` is required for the last two and should say concretely what to change and why. " +
	"Pass `commit_id` (the head SHA you reviewed) so the review is not applied to commits you have not seen. Answers the review's `id` and `state`. " +
	"With a request ID, a call run again with the same ID answers the review it submitted (`replayed`)."

const guideRepoFile = "Read one file at a branch, tag or commit without cloning: `{\"repo\", \"path\": \"docs/README.md\", \"ref\"?: \"main\"}`. " +
	"Answers `content` (UTF-8 text, or base64 when `encoding` is `base64`), its blob `sha` and `size`. " +
	"A file larger than `max_bytes` (default 262144, at most 1048576) is refused with github_file_too_large: clone the repository instead. " +
	"A directory is github_not_a_file."

const guideChecksList = "List the check runs (CI) of a commit: `{\"repo\", \"ref\": \"<sha or branch>\"}`, or of a pull request's head: `{\"repo\", \"number\"}`. " +
	"Each run has `status` (`queued`, `in_progress`, `completed`) and, once completed, `conclusion` (`success`, `failure`, `neutral`, `cancelled`, `skipped`, `timed_out`, `action_required`). " +
	"At most 100 runs; `total` counts them all. To wait for checks to finish, declare a wait rather than calling this in a loop."

const guideChecksView = "Read one check run in full, with its output's title, summary and text (the text cut at 65536 bytes, `text_truncated`), " +
	"to find out why it failed: `{\"repo\", \"id\"}` with an id from github.checks.list or github.issue.view."

const guidePRMerge = "Merge a pull request: `{\"repo\", \"number\", \"method\"?: \"merge\"|\"squash\"|\"rebase\", \"sha\"?, \"commit_title\"?, \"commit_message\"?}`. " +
	"Pass `sha`, the head you checked, so a head that moved since is not merged (github_conflict). " +
	"github_not_mergeable: it has conflicts, failing required checks or missing approvals. Only merge when your task says so."

const guideGitCredential = "Not called directly: `git` calls it through `os git-credential` (configure `git config credential.helper '!os git-credential'`). " +
	"It answers a short-lived token for one repository of this GitHub (the one git's path names, or the Work's own), " +
	"and only for a repository the Work's scope allows. If git sends no path, set `git config credential.useHttpPath true`."
