package ghapi

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-github/v93/github"
)

// Credentials are where the operations' authorization comes from.
type Credentials interface {
	// Token answers a token GitHub accepts for calls on repo ("owner/repo",
	// lower case). A refusal is an *extension.OperationError.
	Token(ctx context.Context, repo string) (Token, error)
	// Invalidate forgets tok for repo when GitHub refused it (401), so the
	// next Token mints a new one. A credential that caches nothing ignores
	// it.
	Invalidate(repo string, tok Token)
}

// Token is a credential for GitHub's API. Its value is reachable only
// through Reveal: printing, logging or encoding a Token shows
// "[redacted]".
type Token struct {
	value string
	// ExpiresAt is when GitHub stops accepting it (zero: not known).
	ExpiresAt time.Time
}

const redacted = "[redacted]"

// Reveal answers the token's value, to be sent to GitHub or handed to git.
func (t Token) Reveal() string { return t.value }

// String hides the value.
func (t Token) String() string { return redacted }

// GoString hides the value.
func (t Token) GoString() string { return redacted }

// Format hides the value whatever the verb.
func (t Token) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue hides the value from log/slog.
func (t Token) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON hides the value from encoding/json.
func (t Token) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// StaticToken is a plain token (a personal access token, or any token the
// secret resolver gave): the same for every repository, never expiring as
// far as this package knows.
func StaticToken(token string) Credentials { return staticToken{Token{value: token}} }

type staticToken struct{ t Token }

func (s staticToken) Token(context.Context, string) (Token, error) {
	if s.t.value == "" {
		return Token{}, refuse(CodeNotConfigured, "no GitHub token is configured")
	}
	return s.t, nil
}

func (staticToken) Invalidate(string, Token) {}

// DefaultMargin is how long before its expiry an installation token is
// minted again: a token handed out is good for at least this long, time
// enough for a git clone or push to finish with it.
const DefaultMargin = 5 * time.Minute

// jwtLifetime is the App JWT's lifetime (GitHub allows at most 10 minutes);
// jwtBackdate is how far its iat is set in the past, for clock drift
// between this host and GitHub, as GitHub advises.
const (
	jwtLifetime = 9 * time.Minute
	jwtBackdate = 60 * time.Second
)

// AppOptions configure a GitHub App's credentials.
type AppOptions struct {
	// AppID is the App's numeric id (the JWT's issuer).
	AppID int64
	// PrivateKey is the App's private key, PEM (PKCS #1 or PKCS #8), as
	// the secret resolver gave it.
	PrivateKey string
	// BaseURL is GitHub's API (see Options.BaseURL).
	BaseURL string
	// HTTPClient sends the requests (nil: a client with DefaultTimeout).
	HTTPClient *http.Client
	// Now is the clock (required).
	Now func() time.Time
	// Margin is DefaultMargin when zero.
	Margin time.Duration
	// Logger, when set, is told when a token is minted: the repository and
	// the expiry, never the token.
	Logger *slog.Logger
}

// App authenticates as a GitHub App: for each repository it mints an
// installation token narrowed to that one repository (GET
// /repos/{owner}/{repo}/installation, then POST
// /app/installations/{id}/access_tokens, both with an RS256 JWT) and keeps
// it in memory only, until Margin before it expires.
type App struct {
	o    AppOptions
	key  *rsa.PrivateKey
	base string

	mu      sync.Mutex
	entries map[string]*appEntry
}

type appEntry struct {
	mu  sync.Mutex // held while minting, so one repository mints once at a time
	tok Token
}

// NewApp checks o and parses the private key. Its error never quotes the
// key.
func NewApp(o AppOptions) (*App, error) {
	if o.AppID <= 0 {
		return nil, errors.New("ghapi: the GitHub App id must be a positive number")
	}
	if o.Now == nil {
		return nil, errors.New("ghapi: AppOptions.Now is required")
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(o.PrivateKey))
	if err != nil {
		return nil, errors.New("ghapi: the GitHub App private key is not an RSA private key in PEM")
	}
	base, err := baseURL(o.BaseURL)
	if err != nil {
		return nil, err
	}
	if o.Margin <= 0 {
		o.Margin = DefaultMargin
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultHTTPClient()
	}
	return &App{o: o, key: key, base: base, entries: map[string]*appEntry{}}, nil
}

// Token answers the cached installation token for repo while it is good
// for more than Margin, and mints a new one otherwise.
func (a *App) Token(ctx context.Context, repo string) (Token, error) {
	a.mu.Lock()
	e := a.entries[repo]
	if e == nil {
		e = &appEntry{}
		a.entries[repo] = e
	}
	a.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tok.value != "" && a.o.Now().Before(e.tok.ExpiresAt.Add(-a.o.Margin)) {
		return e.tok, nil
	}
	e.tok = Token{}
	tok, err := a.mint(ctx, repo)
	if err != nil {
		return Token{}, err
	}
	if a.o.Now().Before(tok.ExpiresAt.Add(-a.o.Margin)) {
		e.tok = tok // otherwise used once and minted again next time
	}
	if a.o.Logger != nil {
		a.o.Logger.Info("github installation token minted", "repo", repo, "expires_at", tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tok, nil
}

// Invalidate forgets repo's cached token if it is still tok.
func (a *App) Invalidate(repo string, tok Token) {
	a.mu.Lock()
	e := a.entries[repo]
	a.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	if e.tok.value == tok.value {
		e.tok = Token{}
	}
	e.mu.Unlock()
}

// JWT answers a JWT for the App's own endpoints (/app/...), signed now.
func (a *App) JWT() (string, error) {
	now := a.o.Now()
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(a.o.AppID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-jwtBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(a.key)
	if err != nil {
		return "", errors.New("ghapi: signing the GitHub App JWT failed")
	}
	return s, nil
}

func (a *App) mint(ctx context.Context, repo string) (Token, error) {
	owner, name, _ := strings.Cut(repo, "/")
	signed, err := a.JWT()
	if err != nil {
		return Token{}, err
	}
	c, err := newClient(a.base, a.o.HTTPClient, signed)
	if err != nil {
		return Token{}, err
	}
	inst, _, err := c.Apps.GetRepositoryInstallation(ctx, owner, name)
	if err != nil {
		if status(err) == http.StatusNotFound {
			return Token{}, refuse(CodeAppNotInstalled, "the GitHub App is not installed on this repository")
		}
		return Token{}, mapError(err, a.o.Now)
	}
	it, _, err := c.Apps.CreateInstallationToken(ctx, inst.GetID(), &github.InstallationTokenOptions{Repositories: []string{name}})
	if err != nil {
		return Token{}, mapError(err, a.o.Now)
	}
	if it.GetToken() == "" || it.ExpiresAt == nil {
		return Token{}, refuse(CodeBadResponse, "GitHub answered the installation token request without a token or its expiry")
	}
	return Token{value: it.GetToken(), ExpiresAt: it.GetExpiresAt().Time}, nil
}
