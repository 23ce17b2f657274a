package management

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbeltapi"
)

// ExecutionHandler serves every execution's own toolbelt socket with tb
// (see toolbeltapi.New): an operator credential of this server's store is
// refused there with wrong_credential_class, and failures are logged to
// the server's logger.
func (s *Server) ExecutionHandler(tb extension.Toolbelt) http.Handler {
	opts := toolbeltapi.Options{Toolbelt: tb, Operators: newOperatorCheck(s.opts.Credentials, tb), Logger: s.log}
	if s.opts.Refused != nil {
		opts.Refused = func(code string) { s.opts.Refused(SocketToolbelt, code) }
	}
	return toolbeltapi.New(opts)
}

// knownExecutionTokens is what the toolbelt tells the operator check
// without reading storage: whether a digest is a live execution token it
// authenticated a call with (toolbelt.Toolbelt.CachedExecutionToken).
type knownExecutionTokens interface {
	CachedExecutionToken(d Digest) bool
}

// operatorCheck is the toolbelt socket's port onto the operator
// credentials. A digest the toolbelt holds as a live execution token is
// not an operator's (both credentials are 32 random bytes, so they never
// share a digest), and is answered without the credential lookup, which
// every call would otherwise make.
type operatorCheck struct {
	creds Credentials
	known func(Digest) bool // nil: always look up
}

func newOperatorCheck(creds Credentials, tb extension.Toolbelt) operatorCheck {
	check := operatorCheck{creds: creds}
	if k, ok := tb.(knownExecutionTokens); ok {
		check.known = k.CachedExecutionToken
	}
	return check
}

func (o operatorCheck) IsOperator(ctx context.Context, d Digest) (bool, error) {
	if o.known != nil && o.known(d) {
		return false, nil
	}
	c, err := o.creds.ByDigest(ctx, d)
	switch {
	case err == nil:
		return c.Active(), nil
	case errors.Is(err, extension.ErrNotFound):
		return false, nil
	}
	return false, err
}

// ToolbeltTokens adapts the toolbelt's token records to ExecutionTokens,
// so that the management socket recognises an execution token (403
// wrong_credential_class on every route) and revokes one by id:
// management.Options{ExecutionTokens: management.ToolbeltTokens(tb)}.
func ToolbeltTokens(tb *toolbelt.Toolbelt) ExecutionTokens { return toolbeltTokens{tb} }

type toolbeltTokens struct{ tb *toolbelt.Toolbelt }

func (t toolbeltTokens) ByDigest(ctx context.Context, d Digest) (ExecutionToken, error) {
	tok, err := t.tb.TokenByDigest(ctx, d)
	if err != nil {
		return ExecutionToken{}, err
	}
	return ExecutionToken{ID: tok.ID, ExecutionID: tok.Execution, ExpiresAt: tok.ExpiresAt, RevokedAt: tok.RevokedAt}, nil
}

// Revoke revokes the token at the toolbelt's own clock; at is the
// server's view of now and is not needed.
func (t toolbeltTokens) Revoke(ctx context.Context, id string, _ time.Time) error {
	return t.tb.Revoke(ctx, id)
}
