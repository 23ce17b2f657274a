package slack

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/open-conduit/open-conduit/extension"
)

// DefaultTimeout bounds one call of Slack's Web API when no HTTPClient is
// given.
const DefaultTimeout = 30 * time.Second

// The codes of the operations' refusals.
const (
	// CodeNotConfigured: the extension has no api config (or no port to
	// read the Work's thread through).
	CodeNotConfigured = "slack_not_configured"
	// CodeInvalidInput: the input does not match the operation's schema.
	CodeInvalidInput = "slack_invalid_input"
	// CodeNoThread: the Work was not started on a Slack Event, so it has
	// no thread of its own.
	CodeNoThread = "slack_no_thread"
	// CodeChannelNotAllowed: the channel is not one the Work's scope
	// claims.
	CodeChannelNotAllowed = "slack_channel_not_allowed"
	// CodeCredentialsUnavailable: the bot token's secret did not resolve.
	CodeCredentialsUnavailable = "slack_credentials_unavailable"
	// CodeCredentialsInvalid: Slack refused the bot token (invalid_auth,
	// not_authed, token_revoked, token_expired, account_inactive).
	CodeCredentialsInvalid = "slack_credentials_invalid"
	// CodeNotFound: Slack knows no such channel, thread or message.
	CodeNotFound = "slack_not_found"
	// CodeForbidden: the app may not do it (not in the channel, a missing
	// OAuth scope, an archived channel, a restricted action).
	CodeForbidden = "slack_forbidden"
	// CodeRateLimited: Slack's rate limit; the message says when to retry.
	CodeRateLimited = "slack_rate_limited"
	// CodeUnavailable: Slack could not be reached or answered 5xx.
	CodeUnavailable = "slack_unavailable"
	// CodeFailed: any other refusal of Slack's; the message names Slack's
	// error code.
	CodeFailed = "slack_failed"
)

// live is what the operations call Slack with while the daemon runs the
// extension: the host that resolves its secrets (the ingress's, run while
// the active configuration enables the extension, again when an apply
// changes its config), the api config of that run and, once a call needed
// it, the client holding the bot token. They live in memory only and go
// when the run ends.
type live struct {
	mu     sync.Mutex
	run    int
	host   extension.IngressHost
	api    *APIConfig
	client *slackapi.Client
}

func (l *live) attach(host extension.IngressHost, a *APIConfig) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run++
	l.host, l.api, l.client = host, a, nil
	return l.run
}

func (l *live) detach(run int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run == run {
		l.host, l.api, l.client = nil, nil, nil
	}
}

var codeRule = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// client answers the current run's Slack client, resolving the bot token
// at the run's first call; a failure is not kept.
func (e *Extension) client(ctx context.Context) (*slackapi.Client, error) {
	l := &e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		return l.client, nil
	}
	if l.host == nil || l.api == nil {
		return nil, &extension.OperationError{Code: CodeNotConfigured,
			Message: "the Slack extension has no bot token: configure extensions.slack.config.api"}
	}
	tok, err := l.host.Secret(ctx, l.api.Token)
	if err != nil {
		code := "secret_unavailable"
		if errors.Is(err, extension.ErrNotFound) {
			code = "unknown_secret"
		} else if s := err.Error(); codeRule.MatchString(s) {
			code = s
		}
		return nil, &extension.OperationError{Code: CodeCredentialsUnavailable,
			Message: "the secret named by extensions.slack.config.api.token could not be resolved (" + code + ")"}
	}
	hc := e.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	opts := []slackapi.Option{slackapi.OptionHTTPClient(hc)}
	if l.api.URL != "" {
		opts = append(opts, slackapi.OptionAPIURL(l.api.URL))
	}
	l.client = slackapi.New(strings.TrimSpace(tok), opts...)
	return l.client, nil
}

// Slack's error codes by the code the operations answer.
var slackCodes = map[string]string{
	"invalid_auth": CodeCredentialsInvalid, "not_authed": CodeCredentialsInvalid, "token_revoked": CodeCredentialsInvalid,
	"token_expired": CodeCredentialsInvalid, "account_inactive": CodeCredentialsInvalid,
	"channel_not_found": CodeNotFound, "thread_not_found": CodeNotFound, "message_not_found": CodeNotFound,
	"not_in_channel": CodeForbidden, "missing_scope": CodeForbidden, "is_archived": CodeForbidden, "restricted_action": CodeForbidden,
	"restricted_action_read_only_channel": CodeForbidden, "restricted_action_thread_only_channel": CodeForbidden,
	"restricted_action_non_threadable_channel": CodeForbidden, "cannot_reply_to_message": CodeForbidden,
	"ekm_access_denied": CodeForbidden, "access_denied": CodeForbidden, "team_access_not_granted": CodeForbidden,
	"ratelimited": CodeRateLimited, "rate_limited": CodeRateLimited,
	"msg_too_long": CodeInvalidInput, "no_text": CodeInvalidInput, "invalid_cursor": CodeInvalidInput, "invalid_ts_latest": CodeInvalidInput,
	"internal_error": CodeUnavailable, "fatal_error": CodeUnavailable, "service_unavailable": CodeUnavailable, "request_timeout": CodeUnavailable,
}

// slackError turns an error of the Slack client into the operation's
// refusal: a stable code and a message naming Slack's own error code (a
// word of Slack's, never a value of the request).
func slackError(op string, err error) error {
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		secs := int64(rl.RetryAfter / time.Second)
		return &extension.OperationError{Code: CodeRateLimited, Message: op + ": Slack's rate limit; retry after " + strconv.FormatInt(secs, 10) + "s"}
	}
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		word := se.Err
		if !codeRule.MatchString(word) {
			word = "unknown"
		}
		code, ok := slackCodes[word]
		if !ok {
			code = CodeFailed
		}
		return &extension.OperationError{Code: code, Message: op + ": Slack refused the call (" + word + ")"}
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) {
		switch {
		case sc.Code == http.StatusTooManyRequests:
			return &extension.OperationError{Code: CodeRateLimited, Message: op + ": Slack's rate limit; retry later"}
		case sc.Code == http.StatusUnauthorized:
			return &extension.OperationError{Code: CodeCredentialsInvalid, Message: op + ": Slack refused the bot token (HTTP 401)"}
		case sc.Code == http.StatusForbidden:
			return &extension.OperationError{Code: CodeForbidden, Message: op + ": Slack refused the call (HTTP 403)"}
		case sc.Code == http.StatusNotFound:
			return &extension.OperationError{Code: CodeNotFound, Message: op + ": Slack answered HTTP 404"}
		}
		return &extension.OperationError{Code: CodeUnavailable, Message: op + ": Slack answered HTTP " + strconv.Itoa(sc.Code)}
	}
	// A transport error's text can hold a URL: it is not shown.
	return &extension.OperationError{Code: CodeUnavailable, Message: op + ": Slack could not be reached"}
}
