package github

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/github/ghapi"
)

// Codes of the extension's own refusals beyond ghapi's.
const (
	// CodeCredentialsUnavailable: a secret the api config names could not
	// be resolved; the message names the member and the resolver's code.
	CodeCredentialsUnavailable = "github_credentials_unavailable"
	// CodeCredentialsInvalid: the resolved App id is not a number, or its
	// private key is not an RSA key in PEM.
	CodeCredentialsInvalid = "github_credentials_invalid"
)

// live is what the operations call GitHub with while the daemon runs the
// extension: the host that resolves its secrets (the ingress's, which the
// daemon runs while the active configuration enables the extension, and
// runs again when an apply changes its config or a secret reference), the
// api config of that run, and, once a call needed them, the credentials
// and the operations built on them. They live in memory only and go when
// the run ends.
type live struct {
	mu   sync.Mutex
	run  int // which run attached; detach forgets only its own
	host extension.IngressHost
	api  *APIConfig
	ops  map[string]extension.Handler
}

// attach makes host and api the ones the operations use, forgetting any
// credential built before; it answers the run's number for detach.
func (l *live) attach(host extension.IngressHost, api *APIConfig) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run++
	l.host, l.api, l.ops = host, api, nil
	return l.run
}

// detach forgets run's host and credentials, unless a later run attached.
func (l *live) detach(run int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run == run {
		l.host, l.api, l.ops = nil, nil, nil
	}
}

var codeRule = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// unavailable is the refusal of a secret that did not resolve: the member
// that names it and the resolver's code (the host's error is a code only;
// anything else is not shown).
func unavailable(member string, err error) error {
	code := "secret_unavailable"
	if errors.Is(err, extension.ErrNotFound) {
		code = "unknown_secret"
	} else if s := err.Error(); codeRule.MatchString(s) {
		code = s
	}
	return &extension.OperationError{Code: CodeCredentialsUnavailable,
		Message: "the secret named by extensions.github.config.api." + member + " could not be resolved (" + code + ")"}
}

// handlers answers the operations built on the current run's credentials,
// resolving the secrets and building them at the first call of the run;
// a failure is not kept, so the next call tries again.
func (e *Extension) handlers(ctx context.Context) (map[string]extension.Handler, error) {
	l := &e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops != nil {
		return l.ops, nil
	}
	if l.host == nil || l.api == nil || e.Now == nil {
		return nil, &extension.OperationError{Code: ghapi.CodeNotConfigured,
			Message: "the GitHub extension has no API credential: configure extensions.github.config.api (an App or a token)"}
	}
	var creds ghapi.Credentials
	switch a := l.api; {
	case a.App != nil:
		id, err := l.host.Secret(ctx, a.App.ID)
		if err != nil {
			return nil, unavailable("app.id", err)
		}
		appID, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
		if err != nil || appID <= 0 {
			return nil, &extension.OperationError{Code: CodeCredentialsInvalid, Message: "the secret named by extensions.github.config.api.app.id is not a GitHub App's numeric id"}
		}
		key, err := l.host.Secret(ctx, a.App.PrivateKey)
		if err != nil {
			return nil, unavailable("app.private_key", err)
		}
		app, err := ghapi.NewApp(ghapi.AppOptions{AppID: appID, PrivateKey: key, BaseURL: a.URL, HTTPClient: e.HTTPClient, Now: e.Now, Logger: l.host.Logger()})
		if err != nil {
			// Its text never quotes the key, but it is not shown either.
			return nil, &extension.OperationError{Code: CodeCredentialsInvalid, Message: "the secret named by extensions.github.config.api.app.private_key is not an RSA private key in PEM"}
		}
		creds = app
	default:
		tok, err := l.host.Secret(ctx, a.Token)
		if err != nil {
			return nil, unavailable("token", err)
		}
		creds = ghapi.StaticToken(strings.TrimSpace(tok))
	}
	ops, err := ghapi.Operations(ghapi.Options{
		Credentials: creds, BaseURL: l.api.URL, HTTPClient: e.HTTPClient, Now: e.Now,
		Allow:          allow,
		WorkRepository: workRepository,
	})
	if err != nil {
		return nil, &extension.OperationError{Code: ghapi.CodeNotConfigured, Message: "the GitHub API's base URL is not usable"}
	}
	l.ops = map[string]extension.Handler{}
	for _, op := range ops {
		l.ops[op.Name] = op.Handler
	}
	return l.ops, nil
}

// allow lets a call of scope auth.Scope touch repo only when the
// extension's config (of the active generation, as the call was handed
// it) claims repo for that scope by name (repositories). An installation's
// claim routes its Events but grants no repository: which repositories an
// installation holds is GitHub's to say, not the configuration's.
func allow(auth extension.Authority, repo string) bool {
	c, err := parseConfig(auth.Config)
	if err != nil {
		return false
	}
	_, ok := claimsOf(c).repoIn(auth.Scope, repo)
	return ok
}

// workRepository is the Work's own repository for github.git.credential
// when git sends no path: the one repository the Work's scope claims, when
// it claims exactly one. The host hands an operation no Event of its Work,
// so the trigger's correlation key cannot say which repository it is.
func workRepository(auth extension.Authority) (string, bool) {
	c, err := parseConfig(auth.Config)
	if err != nil {
		return "", false
	}
	return claimsOf(c).onlyRepo(auth.Scope)
}

// apiOperations are the ghapi operations as registered: their names,
// schemas and guidance from ghapi, each served by the current run's
// credentials.
func (e *Extension) apiOperations() []extension.Operation {
	described, err := ghapi.Operations(ghapi.Options{})
	if err != nil {
		panic("github: describing the ghapi operations: " + err.Error())
	}
	out := make([]extension.Operation, len(described))
	for i, op := range described {
		name := op.Name
		op.Handler = func(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
			hs, err := e.handlers(ctx)
			if err != nil {
				return nil, err
			}
			return hs[name](ctx, auth, input)
		}
		out[i] = op
	}
	return out
}
