package ghapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v93/github"

	"github.com/open-conduit/open-conduit/extension"
)

// Codes of the operations' refusals (422). Those naming GitHub's answer
// are decided by its status alone; none carries GitHub's response body.
const (
	// CodeInvalidInput: the input does not match the operation's schema.
	CodeInvalidInput = "invalid_input"
	// CodeRepoNotAllowed: the repository is outside what the caller's
	// scope allows.
	CodeRepoNotAllowed = "github_repo_not_allowed"
	// CodeNotConfigured: the extension has no credential (registered for
	// its names only).
	CodeNotConfigured = "github_not_configured"
	// CodeAppNotInstalled: the App has no installation on the repository.
	CodeAppNotInstalled = "github_app_not_installed"
	// CodeUnauthorized: GitHub refused the credential (401).
	CodeUnauthorized = "github_unauthorized"
	// CodeForbidden: the credential may not do this (403).
	CodeForbidden = "github_forbidden"
	// CodeNotFound: no such repository, issue, pull request, file or check
	// run, or the credential may not see it (404).
	CodeNotFound = "github_not_found"
	// CodeConflict: GitHub refused for the state things are in (409), such
	// as a merge whose head moved.
	CodeConflict = "github_conflict"
	// CodeNotMergeable: the pull request cannot be merged as it is (405).
	CodeNotMergeable = "github_not_mergeable"
	// CodeValidationFailed: GitHub found the request invalid (422).
	CodeValidationFailed = "github_validation_failed"
	// CodeRateLimited: a primary or secondary rate limit; the message says
	// when to try again.
	CodeRateLimited = "github_rate_limited"
	// CodeUnavailable: GitHub did not answer, or answered 5xx.
	CodeUnavailable = "github_unavailable"
	// CodeRequestFailed: any other refusal of GitHub's (4xx).
	CodeRequestFailed = "github_request_failed"
	// CodeBadResponse: GitHub's answer could not be read.
	CodeBadResponse = "github_bad_response"
	// CodeResponseTooLarge: GitHub's answer passed MaxResponseBytes.
	CodeResponseTooLarge = "github_response_too_large"
	// CodeFileTooLarge: github.repo.file's file is larger than its bound.
	CodeFileTooLarge = "github_file_too_large"
	// CodeNotAFile: github.repo.file named a directory, a symlink or a
	// submodule.
	CodeNotAFile = "github_not_a_file"
	// CodeRepositoryUnknown: github.git.credential could not tell which
	// repository git asks for.
	CodeRepositoryUnknown = "github_repository_unknown"
	// CodeWrongHost: github.git.credential was asked for another host
	// than this GitHub's.
	CodeWrongHost = "github_wrong_host"
)

func refuse(code, format string, args ...any) error {
	return &extension.OperationError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// status answers the HTTP status of GitHub's refusal, 0 when err is not
// one.
func status(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	var tf *github.TwoFactorAuthError
	if errors.As(err, &tf) {
		return http.StatusUnauthorized
	}
	return 0
}

// mapError turns what the client returned into an OperationError. It reads
// only types, statuses and rate headers: GitHub's message, its errors and
// the request's URL never reach the caller.
func mapError(err error, now func() time.Time) error {
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return err
	}
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		if reset := rl.Rate.Reset.Time; !reset.IsZero() {
			return refuse(CodeRateLimited, "GitHub's rate limit is exhausted; it resets at %s", reset.UTC().Format(time.RFC3339))
		}
		return refuse(CodeRateLimited, "GitHub's rate limit is exhausted; try again later")
	}
	var ab *github.AbuseRateLimitError
	if errors.As(err, &ab) {
		if ab.RetryAfter != nil {
			return refuse(CodeRateLimited, "GitHub's secondary rate limit was hit; retry after %s", now().Add(*ab.RetryAfter).UTC().Format(time.RFC3339))
		}
		return refuse(CodeRateLimited, "GitHub's secondary rate limit was hit; slow down and try again later")
	}
	if errors.Is(err, errTooLarge) {
		return refuse(CodeResponseTooLarge, "GitHub's answer is larger than %d bytes", MaxResponseBytes)
	}
	switch s := status(err); {
	case s == http.StatusUnauthorized:
		return refuse(CodeUnauthorized, "GitHub refused the credential (401)")
	case s == http.StatusForbidden:
		return refuse(CodeForbidden, "GitHub refused: the credential may not do this (403)")
	case s == http.StatusNotFound:
		return refuse(CodeNotFound, "GitHub found no such thing, or the credential may not see it (404)")
	case s == http.StatusConflict:
		return refuse(CodeConflict, "GitHub refused for the state it is in (409)")
	case s == http.StatusUnprocessableEntity:
		return refuse(CodeValidationFailed, "GitHub refused the request as invalid (422); check the input against the operation's guidance")
	case s == http.StatusTooManyRequests:
		var er *github.ErrorResponse
		if errors.As(err, &er) {
			if secs, perr := strconv.Atoi(er.Response.Header.Get("Retry-After")); perr == nil && secs >= 0 {
				return refuse(CodeRateLimited, "GitHub's rate limit was hit; retry after %s", now().Add(time.Duration(secs)*time.Second).UTC().Format(time.RFC3339))
			}
		}
		return refuse(CodeRateLimited, "GitHub's rate limit was hit; try again later")
	case s >= 500:
		return refuse(CodeUnavailable, "GitHub is unavailable (%d); try again later", s)
	case s >= 400:
		return refuse(CodeRequestFailed, "GitHub refused the request (%d)", s)
	case s != 0:
		return refuse(CodeBadResponse, "GitHub answered with an unexpected status (%d)", s)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return refuse(CodeUnavailable, "GitHub did not answer in time")
	}
	var ae *github.AcceptedError
	if errors.As(err, &ae) {
		return refuse(CodeUnavailable, "GitHub is still preparing the answer (202); try again shortly")
	}
	if isTransport(err) {
		return refuse(CodeUnavailable, "GitHub could not be reached")
	}
	return refuse(CodeBadResponse, "GitHub's answer could not be read")
}
