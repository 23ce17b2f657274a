package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/github/ghapi"
)

// The translated waits: each declares, like the wait builtin, a wait on
// the ingress's Events of one issue or pull request (its correlation key
// owner/repo#N), with a timeout.
const (
	OpWaitChecks  = "github.wait.checks"
	OpWaitReview  = "github.wait.review"
	OpWaitComment = "github.wait.comment"
	OpWaitClosed  = "github.wait.closed"
	// OpReport is the translated emission: a progress report as a
	// github.report.<state> Event.
	OpReport = "github.report"
)

// Timeouts of the translated waits.
const (
	DefaultWaitTimeout = 24 * time.Hour
	MaxWaitTimeout     = 30 * 24 * time.Hour
)

// waitKinds are the Event types each translated wait wakes on.
var waitKinds = []struct {
	op, summary, what string
	types             []string
}{
	{OpWaitChecks, "Wait until a pull request's checks complete (a check suite of its head completes).", "a check suite of the pull request completes",
		[]string{"github.check_suite.completed"}},
	{OpWaitReview, "Wait until a review of a pull request is submitted.", "a review of the pull request is submitted",
		[]string{"github.pull_request_review.submitted"}},
	{OpWaitComment, "Wait until a new comment arrives on an issue or pull request.", "a comment is created on the issue or pull request (a review comment included)",
		[]string{"github.issue_comment.created", "github.pull_request_review_comment.created"}},
	{OpWaitClosed, "Wait until a pull request is merged or closed, or an issue is closed.", "the pull request is merged or closed (data.pull_request.merged says which), or the issue is closed",
		[]string{"github.pull_request.closed", "github.issues.closed"}},
}

const waitSchema = `{"type":"object","additionalProperties":false,"required":["repo","number"],"properties":{` +
	`"repo":{"type":"string","description":"owner/repo, one the Work's scope claims"},` +
	`"number":{"type":"integer","minimum":1,"description":"the issue's or pull request's number"},` +
	`"timeout":{"type":"string","description":"a Go duration such as 30m or 6h: how long to wait before waking with core.wait.timed_out (default 24h, at most 720h)"}}}`

func waitGuidance(what string) string {
	return "Declare a wait, as `wait` does, until " + what + ": `{\"repo\": \"owner/repo\", \"number\": 42, \"timeout\"?: \"6h\"}`. " +
		"Your authority is released at once: stop and exit. The Work wakes on the GitHub Event (its correlation key `owner/repo#42`), " +
		"or with core.wait.timed_out after the timeout (default 24h); read the Event that woke it with read_context, then the issue or pull request again with github.issue.view. " +
		"github_repo_not_allowed: the repository is not one this Work's scope claims."
}

type waitInput struct {
	Repo    string `json:"repo"`
	Number  int64  `json:"number"`
	Timeout string `json:"timeout"`
}

// subject checks repo and number for op and answers the correlation key
// owner/repo#N, the repository spelled as configured.
func subject(op string, auth extension.Authority, repo string, number int64) (string, string, error) {
	if number < 1 {
		return "", "", &extension.OperationError{Code: ghapi.CodeInvalidInput, Message: op + ": number must be a positive integer"}
	}
	c, err := parseConfig(auth.Config)
	if err != nil {
		return "", "", &extension.OperationError{Code: ghapi.CodeNotConfigured, Message: "the GitHub extension's configuration does not parse"}
	}
	name, ok := claimsOf(c).repoIn(auth.Scope, repo)
	if !ok {
		return "", "", &extension.OperationError{Code: ghapi.CodeRepoNotAllowed, Message: op + ": this Work's scope does not claim that repository"}
	}
	return name, name + "#" + strconv.FormatInt(number, 10), nil
}

func strictInput(op string, input json.RawMessage, v any) error {
	if err := decodeStrict(input, v); err != nil {
		return &extension.OperationError{Code: ghapi.CodeInvalidInput, Message: "the input of " + op + " does not match its schema (see its guidance)"}
	}
	return nil
}

func waitOperation(op, summary, what string, types []string) extension.Operation {
	return extension.Operation{Name: op, Summary: summary, InputSchema: json.RawMessage(waitSchema), Guidance: waitGuidance(what),
		Wait: func(_ context.Context, auth extension.Authority, input json.RawMessage) (extension.WaitPlan, error) {
			var in waitInput
			if err := strictInput(op, input, &in); err != nil {
				return extension.WaitPlan{}, err
			}
			timeout := DefaultWaitTimeout
			if in.Timeout != "" {
				d, err := time.ParseDuration(in.Timeout)
				if err != nil || d <= 0 || d > MaxWaitTimeout {
					return extension.WaitPlan{}, &extension.OperationError{Code: ghapi.CodeInvalidInput, Message: op + ": timeout is a positive Go duration of at most 720h, such as 30m or 6h"}
				}
				timeout = d
			}
			repo, key, err := subject(op, auth, in.Repo, in.Number)
			if err != nil {
				return extension.WaitPlan{}, err
			}
			out, _ := json.Marshal(map[string]any{"repo": repo, "number": in.Number, "key": key})
			return extension.WaitPlan{Types: append([]string(nil), types...), Keys: []string{key}, Timeout: timeout, Output: out}, nil
		}}
}

// Report states: github.report.<state>.
var reportStates = []string{"progress", "blocked", "done"}

const reportSchema = `{"type":"object","additionalProperties":false,"required":["repo","state","summary"],"properties":{` +
	`"repo":{"type":"string","description":"owner/repo, one the Work's scope claims"},` +
	`"number":{"type":"integer","minimum":1,"description":"the issue or pull request reported on; its key owner/repo#N must be this Work's"},` +
	`"state":{"enum":["progress","blocked","done"]},` +
	`"summary":{"type":"string","minLength":1,"maxLength":4096,"description":"what happened, in a sentence or two"},` +
	`"url":{"type":"string","description":"a link to what it is about (a pull request, a comment)"}}}`

const reportGuidance = "Record a progress report about an issue or pull request as an Event, `github.report.progress`, `.blocked` or `.done`, " +
	"which routes can act on (notify someone, start a reviewer): `{\"repo\", \"number\"?, \"state\", \"summary\", \"url\"?}`. " +
	"It posts nothing on GitHub (use github.issue.comment for that). With `number` the Event is correlated with `owner/repo#N`, " +
	"which this Work must own (the issue or pull request it was started on); otherwise correlation_not_owned. Pass a request ID: a retry is the same Event."

func reportOperation() extension.Operation {
	return extension.Operation{Name: OpReport, Summary: "Record a progress report about an issue or pull request as a github.report.* Event.",
		InputSchema: json.RawMessage(reportSchema), Guidance: reportGuidance,
		Emit: func(_ context.Context, auth extension.Authority, input json.RawMessage) (extension.Emission, error) {
			var in struct {
				Repo    string `json:"repo"`
				Number  int64  `json:"number"`
				State   string `json:"state"`
				Summary string `json:"summary"`
				URL     string `json:"url"`
			}
			if err := strictInput(OpReport, input, &in); err != nil {
				return extension.Emission{}, err
			}
			known := false
			for _, s := range reportStates {
				known = known || s == in.State
			}
			if !known || in.Summary == "" || len(in.Summary) > maxBodyBytes || len(in.URL) > 2048 {
				return extension.Emission{}, &extension.OperationError{Code: ghapi.CodeInvalidInput, Message: fmt.Sprintf("%s: state is progress, blocked or done, summary 1 to %d bytes", OpReport, maxBodyBytes)}
			}
			number := in.Number
			if number == 0 {
				number = 1 // checked for shape only: no key below
			}
			repo, key, err := subject(OpReport, auth, in.Repo, number)
			if err != nil {
				return extension.Emission{}, err
			}
			d := map[string]any{"repository": repo, "state": in.State, "summary": in.Summary}
			if in.Number > 0 {
				d["number"] = in.Number
			} else {
				key = ""
			}
			if in.URL != "" {
				d["url"] = in.URL
			}
			data, _ := json.Marshal(d)
			return extension.Emission{Type: EventPrefix + "report." + in.State, Data: data, CorrelationKey: key}, nil
		}}
}

// decodeStrict reads input into v: an unknown member, a wrong type or
// trailing data is refused.
func decodeStrict(input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
