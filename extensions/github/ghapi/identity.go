package ghapi

import (
	"context"
	"strings"
	"sync"

	"github.com/google/go-github/v93/github"
)

// identity is the account a service's credential acts as on GitHub, the
// author of everything its operations create: learned at the first
// operation that needs it and kept, since a service's credential does not
// change (a new configuration builds a new service). A failure is not
// kept: the next operation asks again.
type identity struct {
	mu    sync.Mutex
	login string
}

// Loginer is a credential that knows its account's login without an API
// call on an installation token (which GET /user refuses).
type Loginer interface {
	Login(ctx context.Context) (string, error)
}

// login answers the login of the credential's account, "" when it cannot
// be learned now. An App asks GET /app with its JWT (its installation
// tokens act as "<slug>[bot]"); any other credential asks GET /user with
// the token c carries.
func (s *service) login(ctx context.Context, c *github.Client) string {
	s.ident.mu.Lock()
	defer s.ident.mu.Unlock()
	if s.ident.login != "" {
		return s.ident.login
	}
	var login string
	if l, ok := s.o.Credentials.(Loginer); ok {
		v, err := l.Login(ctx)
		if err != nil {
			return ""
		}
		login = v
	} else {
		u, _, err := c.Users.Get(ctx, "")
		if err != nil {
			return ""
		}
		login = u.GetLogin()
	}
	s.ident.login = strings.TrimSpace(login)
	return s.ident.login
}

// Login answers the login the App's installation tokens act as:
// "<slug>[bot]", from GET /app with the App's JWT.
func (a *App) Login(ctx context.Context) (string, error) {
	signed, err := a.JWT()
	if err != nil {
		return "", err
	}
	c, err := newClient(a.base, a.o.HTTPClient, signed)
	if err != nil {
		return "", err
	}
	app, _, err := c.Apps.Get(ctx, "")
	if err != nil {
		return "", mapError(err, a.o.Now)
	}
	if app.GetSlug() == "" {
		return "", refuse(CodeBadResponse, "GitHub answered GET /app without the App's slug")
	}
	return app.GetSlug() + "[bot]", nil
}
